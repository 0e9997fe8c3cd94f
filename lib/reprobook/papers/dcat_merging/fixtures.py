"""Smoke fixture of chapter 14's one input that is not a package: the ModelCompose folder.

The full profile reads ``$DCAT_MODELCOMPOSE_DIR`` (:mod:`.paper_scale`): Vicuna-7B v1.5 in
``vicuna-7b-v1.5/`` and one ModelCompose checkpoint per modality. :func:`modelcompose_folder`
writes the same layout, offline and deterministically, at a size that loads in a fraction of a
second: a randomly initialised Llama (the architecture of Vicuna) of width 32 with 2 layers, a
byte-level BPE tokenizer trained in-process that adds ``<s>`` as Llama's does, and LoRAs on
every linear layer of its blocks (rank 4) made with ``peft``. The vision and audio checkpoints
are in the layout of ModelCompose's release (config.json naming the encoder, with ``lora_r``,
``lora_alpha`` and ``lora_strategy``; adapter_model.bin with keys
``model.layers.N.<module>.lora_A.default.weight`` and the modality projector's tensors); the
video checkpoint is in the layout ModelCompose's ``lora_enable`` training writes (a PEFT
adapter saved with ``save_pretrained``, its config.json and non_lora_trainables.bin), so that
the smoke profile reads both.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from .paper_scale import BASE_FOLDER, TEXT

__all__ = ["FIXTURES", "modelcompose_folder", "tiny_llama", "TARGETS"]

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
RANK, ALPHA = 4, 8
# (modality, checkpoint folder, encoder key, encoder, layout)
CHECKPOINTS = (
    ("vision", "multimodal-vicuna-7b-v1.5-vision-naivemc", "mm_vision_encoder",
     "openai/clip-vit-large-patch14-336", "modelcompose"),
    ("audio", "multimodal-vicuna-7b-v1.5-audio-naivemc", "mm_audio_encoder",
     "beats/BEATs_iter3_plus_AS2M.pt", "modelcompose"),
    ("video", "multimodal-vicuna-7b-v1.5-video-naivemc", "mm_video_encoder",
     "LanguageBind/LanguageBind_Video_merge", "peft"),
)  # fmt: skip


def _tokenizer():
    """A byte-level BPE tokenizer trained on the chapter's sentences, with Llama's special
    tokens (``<unk>``, ``<s>``, ``</s>``) and ``<s>`` prepended to every sequence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(TEXT) * 2, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def tiny_llama(vocab_size: int):
    """A randomly initialised Llama of Vicuna's architecture family, cut to width 32."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg)


def _lora(model, seed: int):
    """``model`` wrapped by peft with a rank-4 LoRA on every linear layer of its blocks, the
    factors drawn from ``seed`` (both non-zero, so that each update B A is)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(TARGETS), lora_dropout=0.0)
    with warnings.catch_warnings():  # a deprecation inside peft, not ours
        warnings.simplefilter("ignore", FutureWarning)
        wrapped = get_peft_model(model, config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in wrapped.named_parameters():
            if "lora_" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))
    return wrapped


def _modelcompose_config(base_config: dict, key: str, encoder: str, lora: bool) -> dict:
    out = {**base_config, "model_type": "multimodal"}
    out["architectures"] = ["MultimodalLlamaForCausalLM"]
    out.update({key: encoder, "lora_strategy": "same" if lora else None})
    if lora:
        out.update(lora_r=RANK, lora_alpha=ALPHA)
    return out


def modelcompose_folder(dest: Path) -> None:
    """The fixture of ``env-path:DCAT_MODELCOMPOSE_DIR`` in the layout :mod:`.paper_scale`
    reads: the base LLM, and a vision, an audio and a video checkpoint."""
    from peft.utils import get_peft_model_state_dict
    from transformers.utils import logging

    logging.disable_progress_bar()
    dest = Path(dest)
    tokenizer = _tokenizer()
    base = tiny_llama(len(tokenizer))
    base.save_pretrained(dest / BASE_FOLDER)
    tokenizer.save_pretrained(dest / BASE_FOLDER)
    base_config = json.loads((dest / BASE_FOLDER / "config.json").read_text())
    for i, (modality, name, key, encoder, layout) in enumerate(CHECKPOINTS):
        out = dest / "ModelCompose" / name
        out.mkdir(parents=True)
        wrapped = _lora(tiny_llama(len(tokenizer)), seed=10 + i)
        g = torch.Generator().manual_seed(20 + i)
        projector = {
            f"model.modal_projectors.{modality}.0.weight": torch.randn(32, 8, generator=g),
            f"model.modal_projectors.{modality}.0.bias": torch.zeros(32),
        }
        config = _modelcompose_config(base_config, key, encoder, layout == "modelcompose")
        (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        if layout == "peft":
            wrapped.save_pretrained(out)
            torch.save(projector, out / "non_lora_trainables.bin")
            continue
        state = get_peft_model_state_dict(wrapped)  # base_model.model.<module>.lora_A.weight
        renamed = {
            k.removeprefix("base_model.model.").replace(".weight", ".default.weight"): v.clone()
            for k, v in state.items()
        }
        torch.save({**renamed, **projector}, out / "adapter_model.bin")


FIXTURES = {"env-path:DCAT_MODELCOMPOSE_DIR": modelcompose_folder}
