"""Every default limit of the media plane, stated once.

The media modules' limit dataclasses (``FetchLimits``, ``ImageLimits``, ``VideoLimits``,
``AudioLimits``, ``OffloadLimits``) and the gateway's settings all take their defaults from
here, so a default changed here changes everywhere.
"""

from __future__ import annotations

DEFAULT_MAX_BYTES = 20 * 1024 * 1024  # one media item, fetched or inline
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_TOTAL_TIMEOUT_S = 20.0
DEFAULT_MAX_REDIRECTS = 3

DEFAULT_MAX_PIXELS = 40_000_000  # one image, read from its header before decoding
DEFAULT_MAX_IMAGE_SIDE = 16_384
DEFAULT_DRAFT_MARGIN = 1.5  # JPEG draft decoding keeps at least this x the model's input size

DEFAULT_MAX_VIDEO_DURATION_S = 600.0
DEFAULT_MAX_VIDEO_FRAMES = 36_000  # frames in the file
DEFAULT_MAX_VIDEO_SIDE = 4096
DEFAULT_MAX_VIDEO_PIXELS = 4096 * 2304  # one frame
DEFAULT_MAX_DECODED_FRAMES = 4096  # frames the sampler may decode for one video
DEFAULT_VIDEO_FRAMES = 8  # frames sampled when a request names none

DEFAULT_MAX_AUDIO_DURATION_S = 600.0

DEFAULT_DECODE_WORKERS = 2
DEFAULT_DECODE_TIMEOUT_S = 15.0  # one item's decoding, in a worker process
DEFAULT_DECODE_MEMORY_MB = 4096  # address space of one worker

# The decode thread lane (media/threads.py): still images small enough that the header checks
# bound their decoding in time and memory skip the worker-process round trip.
DEFAULT_DECODE_THREADS = 2  # 0: every item goes to a worker process
DEFAULT_THREAD_MAX_PIXELS = 2048 * 2048  # by the header; ~12 MB decoded RGB
DEFAULT_THREAD_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_THREAD_MAX_SIDE = 4096  # bounds the family's resize of a long thin strip
DEFAULT_INLINE_MAX_PIXELS = 400 * 400  # on the event loop, when it can spare it (0: never)
# Threads (per process, besides the job's own) that share one large resize and run the
# digest beside the decode (media/stripes.py), capped at the cores but two (none on a 2-core
# host, where the event loop and the lane already want both). Modest: several gateway
# workers per host each have their own pool.
DEFAULT_STRIPE_THREADS = 3

# PDF documents (media/pdf.py): rendered page by page in the worker processes.
DEFAULT_PDF_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_PDF_MAX_PAGES = 32
DEFAULT_PDF_DPI = 144.0  # a US Letter page: 1224 x 1584 pixels
DEFAULT_PDF_MAX_PAGE_PIXELS = 2_000_000  # past this the page is rendered at a lower scale
DEFAULT_PDF_MAX_TOTAL_PIXELS = 40_000_000
DEFAULT_PDF_RENDER_TIMEOUT_S = 30.0  # the whole document, in one worker (killed past it)
