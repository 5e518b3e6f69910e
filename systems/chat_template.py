"""The chat template an artifact carries, for an endpoint with a `chat:` block: chat.template written into the
artifact's tokenizer_config.json (where the containers' transformers read it: 4.x and 5.x alike), a sample
conversation with tools rendered with it (systems/hf_fastload/recipe.py check_chat_template), and a refusal when
the artifact ends up with none. Used by the hf-fastload recipe and the LMI recipes (systems/djl_common/build.py).
"""

from __future__ import annotations

from pathlib import Path

from artifact import BuildError
from endpoint_config import EndpointSpec

from .chat import missing_template_error


def write_chat_template(endpoint: EndpointSpec, out_dir: Path, template: str | None = None) -> str | None:
    """Give the artifact in `out_dir` its chat template (`template`, else chat.template, else the tokenizer's own)
    and check it renders. Returns where it came from ("config", "tokenizer") or None without one; BuildError when
    the endpoint asks for chat and there is none, or the template cannot render."""
    from systems.hf_fastload.recipe import check_chat_template, set_chat_template

    if template is None and endpoint.chat:
        template = endpoint.chat.template
    if template is not None:
        set_chat_template(Path(out_dir), template)
    source = check_chat_template(Path(out_dir), given=template is not None)
    if source is None and endpoint.chat:
        raise BuildError(missing_template_error(endpoint, "its tokenizer files carry none"))
    return source


__all__ = ["write_chat_template"]
