"""Video-NeVA: one video as preprocessed frames in fp16 ``image_input``, 256 features a frame.

The encoder treats frames as images: the wire tensor is [1, frames, 3, 224, 224], each frame
CLIP-preprocessed (shortest edge 224, bicubic, 224 crop, CLIP mean/std; ViT-L/14 at 224 px
gives 16 x 16 = 256 features). Frames are sampled by the media plane (``media_io_kwargs.video
.num_frames``, within the server's limits); the engine's ``max_multimodal_len`` must hold
``frames x 256``.

The prompt is NVIDIA's runner's SteerLM template, written whole by the gateway with NeMo's
``<video>`` token where the frame features go (no upstream Triton preprocessing exists to
add it): a system text (the Vicuna sentence unless the request has one), the user turn, the
assistant header and the SteerLM attribute line. Video only: images are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from gateway.families._pixels import preprocess
from gateway.families.base import Conversation, Family, require_final_user_turn
from gateway.families.kosmos2 import CLIP_224

VIDEO = "<video>"
TURN = "<extra_id_1>"
DEFAULT_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. The assistant "
    "gives helpful, detailed, and polite answers to the user's questions."
)
STEERLM = (
    "<extra_id_2>quality:4,toxicity:0,humor:0,creativity:0,helpfulness:4,correctness:4,"
    "coherence:4,complexity:4,verbosity:4\n"
)


class VideoNeva(Family):
    name = "video_neva"
    deployment_must_provide = "a preprocessing that places the frame features where <video> stands"
    video_tensor = "image_input"
    features_per_image = 256  # per frame
    requires_video = True
    stop_strings = (TURN,)
    reserved_markers = (VIDEO, "<image>", "<extra_id_0>", TURN, "<extra_id_2>")

    def render(self, conversation: Conversation) -> str:
        require_final_user_turn(conversation)
        system = (conversation.system or DEFAULT_SYSTEM).strip()
        pieces = [f"<extra_id_0>System\n{system}\n\n"]
        for turn in conversation.turns:
            if turn.role == "user":
                pieces.append(f"{TURN}User{VIDEO * turn.videos}\n{turn.text}\n")
            else:
                pieces.append(f"{TURN}Assistant\n{STEERLM}{turn.text}\n")
        pieces.append(f"{TURN}Assistant\n{STEERLM}")
        return "".join(pieces)

    def prepare_video(self, frames: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [n, H, W, 3], got {frames.shape}")
        return np.stack([preprocess(Image.fromarray(frame), CLIP_224) for frame in frames])

    def stack_video(self, video: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return video.astype(np.float16)[np.newaxis]  # [1, frames, 3, 224, 224]

    def video_processing_options(self) -> str:
        return f"{self.name}:frames:{CLIP_224!r}"

    def video_tokens(self, frames: int) -> int | None:
        return frames * (self.features_per_image or 0)  # 256 per frame, where <video> stands
