"""One legacy completion (``POST /v1/completions``): each prompt as the text the model reads.

On the same skeleton as chat: check against the model, draft, plan, relay; one ``Prepared``
per choice (each prompt, ``n`` times). The prompt goes to Triton as it is, with no chat
template of the gateway's (the deployment's own server-side template, if it has one, still
applies: NVIDIA's preprocessing adds it to every request).
"""

from __future__ import annotations

from gateway.config import MediaSettings
from gateway.errors import InvalidRequest
from gateway.families.base import Conversation, Turn
from gateway.pipeline.admission import admit
from gateway.pipeline.generation import check_prompt_size, check_total_prompt, draft, refuse
from gateway.pipeline.llmapi import prepare_llmapi_completion
from gateway.pipeline.logprobs import logprobs_asked
from gateway.pipeline.relay import Prepared, family_plan, prepared
from gateway.pipeline.structured.guides import check_guide, requested_guide
from gateway.protocol.completions import CompletionRequest
from gateway.served import ServedRuntime
from gateway.services import Preparation


def refuse_unsupported(request: CompletionRequest) -> list[str]:
    """The text prompts; every field the engine cannot honour refused by name."""
    prompts = request.prompts
    if prompts is None:
        raise InvalidRequest(
            "token-id prompts are not supported: the deployment's ensemble takes text "
            "(text_input); send the prompt as a string",
            param="prompt",
            code="unsupported_parameter",
        )
    refusals = {
        "suffix": ("suffix (insertion) is not supported", request.suffix is not None),
        "best_of": (
            "best_of other than n is not supported (no server-side ranking)",
            request.best_of not in (None, request.n),
        ),
        "echo": (
            "echo with logprobs needs the prompt's log probabilities (context logits), which "
            "this gateway does not read",
            request.echo and request.logprobs is not None,
        ),
        "logit_bias": ("logit_bias is not supported", bool(request.logit_bias)),
    }
    refuse(request, refusals)
    return prompts


def _check_prompt(prompt: str, served: ServedRuntime, media: MediaSettings) -> None:
    family = served.family
    if not family.completes_text:
        raise InvalidRequest(
            f"model '{served.config.id}' does not complete text", param="model",
            code="invalid_model",
        )  # fmt: skip
    conversation = Conversation(None, (Turn("user", prompt),))
    family.check_text(conversation)
    admit(
        served.capabilities, (), media,
        conversation=conversation, rules=family.conversation_rules,
    )  # fmt: skip
    check_prompt_size(prompt, served, "prompt")


async def prepare_completion(
    request: CompletionRequest, served: ServedRuntime, services: Preparation
) -> list[Prepared]:
    """Check every prompt, then plan every choice: prompt ``i``'s ``n`` choices are indexes
    ``i * n`` to ``i * n + n - 1``, as OpenAI numbers them."""
    prompts = refuse_unsupported(request)
    asked = requested_guide(request.response_format, request.model_extra)
    for prompt in prompts:
        _check_prompt(prompt, served, services.media.settings)
    limit = served.policy.max_total_prompt_chars
    check_total_prompt([len(p) for p in prompts], request.n, limit, "prompt")
    contract = await served.get_contract()
    if served.llmapi is not None:  # NVIDIA's llmapi model: each prompt as text_input
        return await prepare_llmapi_completion(request, served, contract, prompts)
    guide = None
    if asked is not None:
        guide = await check_guide(asked, contract, served.config.id, services.guides)
    stops = tuple(dict.fromkeys([*request.stop_list, *served.family.stop_strings]))
    logprobs = await logprobs_asked(served, contract, request.logprobs, "logprobs", True)
    timeouts = served.policy.timeouts
    requested = (request.max_tokens, "max_tokens")
    choices = []
    for prompt in prompts:
        for choice in range(request.n):
            generation = draft(
                request, served, contract.decoupled, prompt, requested, stops=stops,
                choice=choice, guide=guide,
            )  # fmt: skip
            plan = await family_plan(served, generation)
            choices.append(
                prepared(served, contract, plan, stops, timeouts=timeouts, logprobs=logprobs)
            )
    return choices
