"""A tiny model family built locally on a CPU: what the demo and the test suite really serve.

``build_demo_family`` trains a ~1 M-parameter Llama reference (byte-level BPE, ChatML template with
Qwen3-style thinking), an under-trained checkpoint of it, a one-layer draft model, and quantizes the
reference with llm-compressor (FP8-Dynamic, W8A8-int8). Heavy imports happen inside functions.
"""

from hfrelease.demo.build import ARTIFACT_IDS, DEMO_BUILDER_VERSION, build_demo_family, tasks_dir

__all__ = ["ARTIFACT_IDS", "DEMO_BUILDER_VERSION", "build_demo_family", "tasks_dir"]
