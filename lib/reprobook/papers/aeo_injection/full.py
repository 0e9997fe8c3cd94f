"""What chapter 13's paper-scale profile needs beyond the toy (notebooks/13_aeo_injection): an
instruction-tuned LLM through ``transformers`` (``Qwen/Qwen2.5-14B-Instruct`` in bf16 on one
GPU) and IHEval through ``datasets``, loaded at run time and never stored in the book (its
licence, CC BY-NC-ND 4.0, forbids sharing modified copies). ``transformers`` is not part of the
book's locked environment, so it is imported only here, inside functions, and a missing package,
weights or data stop with a message that says what to install or fetch. Where they are absent,
the notebooks say so and run the toy at its full size (6 blocks, d = 256).
"""

from __future__ import annotations

from .config import IHEVAL, QWEN

TRANSFORMERS = "transformers==5.23.0"  # the release the paper-scale path was written against


def require_transformers():
    """transformers, or a RuntimeError that names the release to install."""
    try:
        import transformers
    except ImportError:
        raise RuntimeError(
            f"the paper-scale profile runs {QWEN} through `{TRANSFORMERS}`, which is not "
            f"installed: run `pip install {TRANSFORMERS}` (and fetch the weights with "
            "`hf download`), or use the reduced profile"
        ) from None
    return transformers


def load_backbone(name: str = QWEN):
    """(model in bf16 on the GPU, tokenizer) from the local hub cache only: this book never
    downloads weights while it runs. A RuntimeError says what is missing."""
    tf = require_transformers()
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"{name} in bf16 needs a GPU (about 30 GB of memory); none is visible")
    try:
        tok = tf.AutoTokenizer.from_pretrained(name, local_files_only=True)
        model = tf.AutoModelForCausalLM.from_pretrained(
            name, torch_dtype=torch.bfloat16, device_map="cuda", local_files_only=True
        )
    except OSError as err:
        raise RuntimeError(
            f"the weights of {name} are not in the local hub cache ({err}); fetch them with "
            f"`hf download {name}` on a machine with network access"
        ) from None
    return model.eval(), tok


def load_iheval(name: str = IHEVAL):
    """IHEval through ``datasets`` (read at run time, never written into the book)."""
    try:
        import datasets
    except ImportError:
        raise RuntimeError(
            "the paper-scale profile reads IHEval with `datasets`, missing here"
        ) from None
    try:
        return datasets.load_dataset(name)
    except Exception as err:  # offline, gated or renamed: say so and stop
        raise RuntimeError(
            f"IHEval ({name}) could not be loaded ({type(err).__name__}: {err}); it needs the "
            "hub or a local copy in the datasets cache"
        ) from None


def response_states(model, tok, messages: list[dict], max_new_tokens: int = 256):
    """Greedy response of the chat ``messages`` and the hidden states of every layer at each
    generated token: a tuple over steps of tuples over layers, as ``generate`` returns them."""
    import torch

    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(
            ids.to(model.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            output_hidden_states=True,
            return_dict_in_generate=True,
        )
    text = tok.decode(out.sequences[0, ids.shape[1] :], skip_special_tokens=True)
    return text, out.hidden_states


def paper_scale_status(cfg) -> str:
    """Why this run uses the toy, or that the paper's backbone and benchmark are at hand. The
    notebooks measure the toy in every case: the paper's IHEval scorer is not rebuilt here."""
    if cfg.backbone == "tiny":
        return "The reduced profile runs the tiny GPT on the generated language."
    reasons = []
    for step in (lambda: load_iheval(cfg.benchmark), require_transformers):
        try:
            step()
        except RuntimeError as err:
            reasons.append(str(err))
    if reasons:
        return (
            "The paper's scale is not available here: "
            + "; ".join(reasons)
            + f". This run uses the toy at {cfg.layers} blocks, d = {cfg.d}."
        )
    return (
        f"{cfg.backbone} and {cfg.benchmark} are available; the notebooks still measure the "
        f"toy at {cfg.layers} blocks, d = {cfg.d} (the IHEval scoring is not rebuilt here)."
    )
