"""Media micro-benchmark: the gateway's decode paths against the usual way of doing the same.

``python -m bench.media`` times, side by side in one run (interleaved, so a change of machine
load hits both sides alike), ms per item for:

- a 1024 x 1024 and a 12-megapixel JPEG to LLaVA's fp16 ``image_input``: the gateway's worker
  job (decode with JPEG draft, CLIP preprocessing by lookup table) against Hugging Face's
  ``CLIPImageProcessorPil`` on the image PIL opens from the same bytes;
- 8 frames from a 60 s 720p H.264 clip: the gateway's keyframe-seeking sampler against
  decoding every frame (keeping the same 8), same decoder settings.

Inputs are generated once with PIL and PyAV into a cache directory. Results go to
``bench/RESULTS.md`` (its "Media" section) and, with matplotlib, ``bench/plots/media.png``.
"""
