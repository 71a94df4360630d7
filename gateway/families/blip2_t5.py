"""BLIP2-T5 (Flan-T5): BLIP2-OPT's pixels and prompt on an encoder-decoder engine.

The 32 Q-Former features and the ``Question: {q} Answer:`` text feed the T5 encoder
(``text_input``); the decoder starts from T5's decoder start token, which is its pad id and
what NVIDIA's preprocessing uses when no ``decoder_text_input`` is sent, so none is sent.
The enc-dec engines are built without a paged KV cache, so there is no KV reuse to key.
"""

from __future__ import annotations

from gateway.families.blip2_opt import Blip2Opt


class Blip2T5(Blip2Opt):
    name = "blip2_t5"
    nvidia_server_side = None  # NVIDIA's preprocessing serves blip2-opt only
    deployment_must_provide = (
        "an encoder-decoder preprocessing: ViT and Q-Former, the 32 query features "
        "and the text into the T5 encoder, the decoder started at the pad id"
    )
    default_end_id = 1  # T5's </s>
    default_pad_id = 0  # T5's <pad>, also its decoder start token
    supports_extra_id = False  # enc-dec engines: --paged_kv_cache disable, no reuse
    decoder_prompt = None
