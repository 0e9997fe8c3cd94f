"""Tiny offline stand-ins of the full profile's inputs, for the smoke profile of chapter 01.

The smoke profile runs notebook 01_protocol's open-model path (:mod:`.llm`) in seconds on a
CPU. It needs, in the form the full profile loads them:

- the two open models: a randomly initialised Qwen2 and Llama model from tiny configurations
  (the real architecture families of Qwen2.5-7B-Instruct and Llama-3.1-8B-Instruct), each with
  a byte-level BPE tokenizer trained here on a few sentences, the special tokens and a chat
  template in the style of the real one (ChatML for Qwen, header blocks for Llama), and a
  generation configuration that samples by default, as the real ones do, so that the chapter's
  greedy decoding is exercised against it;
- the public FACTS Grounding examples: four made-up rows in the release's schema, saved as a
  ``DatasetDict`` with the split ``public`` of the release's default configuration
  ``examples``.

Nothing here is downloaded, and every builder is seeded, so a fixture is the same each time.
"""

from __future__ import annotations

from pathlib import Path

from reprobook.core.fixtures import save_random_causal_lm

__all__ = ["FIXTURES", "GROUNDING_ROWS", "tiny_qwen", "tiny_llama", "grounding_examples"]

_SEED = 0

# Four made-up prompts in the schema of the release's examples.csv. The card and the code that
# reads the release agree on system_instruction, user_request, context_document and full_prompt
# (the chapter's code uses only these). Copies of the release in other places also carry domain,
# type and high_level_type; whether the hub's CSV has these three we could not confirm offline,
# so the rows keep them (as text, as a CSV gives every column) and the loader does not need them.
_SYSTEM = "Answer the request using only the information in the document below."
_ROWS = (
    (
        "How many rows and columns does the table have?",
        "The survey table has 12 rows and 4 columns. It was compiled in 2019 by the county "
        "office. Each row is one town.",
        "Technology",
        "Q&A",
        "Q&A",
    ),
    (
        "Summarise the refund policy.",
        "Refunds are issued within 30 days of purchase. Items must be unused and in their box. "
        "Gift cards cannot be refunded.",
        "Retail",
        "Summarization",
        "Summarization",
    ),
    (
        "What dose does the leaflet give for adults?",
        "Adults take one tablet twice a day with water. Children under 12 should not take it. "
        "Do not exceed four tablets in a day.",
        "Medical",
        "Fact Finding",
        "Q&A",
    ),
    (
        "Compare the two contracts' notice periods.",
        "Contract A requires 60 days of notice. Contract B requires 30 days of notice and a "
        "written letter. Both renew every year.",
        "Legal",
        "Comparison",
        "Analysis",
    ),
)
GROUNDING_ROWS = tuple(
    {
        "system_instruction": _SYSTEM,
        "user_request": request,
        "context_document": document,
        "full_prompt": f"{_SYSTEM}\n\n{document}\n\n{request}",
        "domain": domain,
        "type": kind,
        "high_level_type": high,
    }
    for request, document, domain, kind, high in _ROWS
)

_QWEN_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_LLAMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}"
    "<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def _training_text() -> list[str]:
    """What the fixtures' tokenizers learn their merges from (byte-level, so they encode any
    text): the rows and the words of the chapter's judge prompts and labels. Kept here, so that
    the fixture's digest covers it."""
    lines = [str(v) for row in GROUNDING_ROWS for v in row.values()]
    lines += [
        "You will see a request, a document and the numbered sentences of a response.",
        "Does the document support each sentence? Answer with one line per sentence.",
        "Does the response address the request? Answer with one rating.",
        "1: supported\n2: unsupported\n3: no_rad",
        "No Issues. Minor Issue(s). Major Issue(s).",
    ]
    return lines


def _tokenizer(special: list[str], template: str, **tokens):
    """A byte-level BPE tokenizer trained on :func:`_training_text`, with ``special`` tokens
    and the chat ``template``; ``tokens`` names the bos/eos/pad tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_training_text(), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, **tokens)
    tok.chat_template = template
    return tok


def _save_model(dest: Path, config, tok, generation: dict) -> None:
    save_random_causal_lm(dest, config, tok, seed=_SEED, generation=generation)


def _small(**ids) -> dict:
    return dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=False,  # untied, as in both real models
        **ids,
    )


def tiny_qwen(dest: Path) -> None:
    """A random two-layer Qwen2 model with a ChatML tokenizer (eos ``<|im_end|>``, pad
    ``<|endoftext|>``, no bos, as Qwen2.5's tokenizer has) and a sampling generation config."""
    from transformers import Qwen2Config

    tok = _tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        _QWEN_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    config = Qwen2Config(vocab_size=len(tok), eos_token_id=eos[0], pad_token_id=eos[1], **_small())
    sampling = dict(do_sample=True, temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.05)
    _save_model(Path(dest), config, tok, dict(eos_token_id=eos, pad_token_id=eos[1], **sampling))


def tiny_llama(dest: Path) -> None:
    """A random two-layer Llama model with a Llama-3-style tokenizer (bos
    ``<|begin_of_text|>``, eos ``<|eot_id|>``, no pad token, as Llama 3.1's tokenizer has) and a
    sampling generation config."""
    from transformers import LlamaConfig

    tok = _tokenizer(
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"]
        + ["<|eot_id|>"],
        _LLAMA_TEMPLATE,
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
    )
    bos, end, eot = (
        tok.convert_tokens_to_ids(t) for t in ("<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>")
    )
    config = LlamaConfig(vocab_size=len(tok), bos_token_id=bos, eos_token_id=[end, eot], **_small())
    sampling = dict(do_sample=True, temperature=0.6, top_p=0.9)
    _save_model(
        Path(dest), config, tok, dict(bos_token_id=bos, eos_token_id=[end, eot], **sampling)
    )


def grounding_examples(dest: Path) -> None:
    """:data:`GROUNDING_ROWS` as the release's default configuration loads: a ``DatasetDict``
    with the one split ``public``, every column a string."""
    import datasets

    public = datasets.Dataset.from_list([dict(r) for r in GROUNDING_ROWS])
    datasets.DatasetDict({"public": public}).save_to_disk(str(dest))


FIXTURES = {
    "hf-model:Qwen/Qwen2.5-7B-Instruct": tiny_qwen,
    "hf-model:meta-llama/Llama-3.1-8B-Instruct": tiny_llama,
    "hf-dataset:google/FACTS-grounding-public": grounding_examples,
}
