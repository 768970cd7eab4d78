"""The demo family's tokenizer: a byte-level BPE trained locally, with a Qwen3-style ChatML template.

Nothing is fetched from the Hub: the vocabulary is learned from the demo corpus itself, so every
word of the synthetic tasks is a single token and the models stay tiny.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

VOCAB_SIZE = 1024
MODEL_MAX_LENGTH = 1024

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Qwen3 keeps <think>/</think> as added but *non-special* tokens: vLLM strips special tokens from the
# output text (skip_special_tokens), and the reasoning parser needs them there and as single ids.
THINK_TOKENS = ("<think>", "</think>")
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)

# ChatML in Qwen3's layout. In thinking mode (the default, as in Qwen3) the model itself opens with
# "<think>\n"; with enable_thinking=false the prompt already holds an empty think block, so vLLM's
# `--reasoning-parser qwen3` (which starts in the reasoning state unless enable_thinking is false)
# splits both modes the way it splits Qwen3's output. Earlier assistant turns drop their reasoning,
# as Qwen3's template does.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set content = message['content'] | map(attribute='text') | join('') -%}"
    "{%- endif -%}"
    "{%- if message['role'] == 'assistant' and '</think>' in content -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)


def assistant_target(*, reasoning: str, answer: str, thinking: bool) -> str:
    """What the model is trained to generate after the generation prompt, ending in <|im_end|>."""
    if thinking:
        return f"<think>\n{reasoning}\n</think>\n\n{answer}{IM_END}"
    return f"{answer}{IM_END}"


def vocabulary_texts(chats: Iterable[tuple[str, str, str]], texts: Iterable[str]) -> list[str]:
    """The strings the BPE is trained on: each (prompt, reasoning, answer) as full ChatML, plus text.

    Training on the rendered markup ("user", "assistant", newlines) makes those single tokens too.
    """
    out: list[str] = []
    for prompt, reasoning, answer in chats:
        for thinking in (True, False):
            target = assistant_target(reasoning=reasoning, answer=answer, thinking=thinking)
            out.append(f"{IM_START}user\n{prompt}{IM_END}\n{IM_START}assistant\n{target}\n")
    out.extend(texts)
    return out


def train_tokenizer(texts: Iterable[str], out_dir: Path) -> None:
    """Train the BPE on ``texts`` and save it with its chat template as a transformers tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])

    # transformers' constructors are untyped; the keyword arguments are checked by the test suite.
    hf_tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        model_max_length=MODEL_MAX_LENGTH,
        clean_up_tokenization_spaces=False,
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    save_tokenizer(hf_tok, out_dir)


def save_tokenizer(tokenizer: PreTrainedTokenizerBase, out_dir: Path) -> None:
    """Save ``tokenizer`` so that its files do not depend on the environment it was loaded in.

    transformers records the loading call's ``local_files_only`` (true under TRANSFORMERS_OFFLINE)
    in tokenizer_config.json; dropping it keeps rebuilds byte-identical and the hashes stable.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(str(out_dir))
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.pop("local_files_only", None) is not None:
        config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
