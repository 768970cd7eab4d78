"""hfrelease: evaluate, render and publish families of LLM artifacts on the Hugging Face Hub."""

__version__ = "0.1.0"
