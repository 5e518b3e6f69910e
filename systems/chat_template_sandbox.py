"""Render one chat template under limits, in a child process of its own (run by path with `python -I`, so that
nothing of ours or of the working folder is importable; systems/chat_template.py check_template_renders starts it).

Reads {"template", "variables", "output_limit", "memory_limit"} as JSON on stdin; writes {"ok": true, "text"} or
{"ok": false, "kind", "error"} on stdout. The environment is transformers' own for chat templates (4.49 and 5.x
utils/chat_template_utils.py _compile_jinja_template: ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, the loopcontrols extension, a tojson filter, raise_exception and strftime_now), so what renders
here renders there. The limits: the output is counted while the template generates it and stopped past
`output_limit` characters; the address space is capped (RLIMIT_AS) so a 2 GB string fails with MemoryError; the
parent kills the process at its time budget (a loop of 10^10 steps, 9 ** 9 ** 9).
"""

import json
import sys
from typing import Any


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        import resource

        limit = int(request["memory_limit"])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    import datetime

    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: object, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
    ) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.datetime.now().strftime(fmt)

    class Generation(jinja2.ext.Extension):
        """transformers' AssistantTracker tag, {% generation %}...{% endgeneration %}: here its body is rendered as
        is (transformers only records where it lies)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body).set_lineno(lineno)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    env.globals["dict"] = dict  # transformers 5 offers dict() to templates (TemplateDict)
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    result: dict[str, object]
    try:
        template = env.from_string(request["template"])
        pieces, size, limit = [], 0, int(request["output_limit"])
        for piece in template.generate(**request["variables"]):
            size += len(piece)
            if size > limit:
                result = {"ok": False, "kind": "output", "error": f"its output passes {limit:,} characters"}
                break
            pieces.append(piece)
        else:
            result = {"ok": True, "text": "".join(pieces)}
    except MemoryError:
        result = {"ok": False, "kind": "memory", "error": "it needs more memory than the budget (MemoryError)"}
    except RecursionError:
        result = {"ok": False, "kind": "recursion", "error": "it recurses without end (RecursionError)"}
    except jinja2.exceptions.TemplateNotFound as err:
        result = {"ok": False, "kind": "include", "error": f"it includes or imports a file ({err.name!r})"}
    except jinja2.exceptions.TemplateSyntaxError as err:
        result = {"ok": False, "kind": "syntax", "error": f"line {err.lineno}: {err.message}"}
    except TypeError as err:
        if "no loader" not in str(err):
            result = {"ok": False, "kind": "error", "error": f"TypeError: {str(err)[:300]}"}
        else:  # {% include %} / {% import %} / {% extends %} in an environment without a loader (jinja2's own words)
            result = {"ok": False, "kind": "include", "error": "it includes, imports or extends a file"}
    except Exception as err:  # the template's own failure, whatever it is: reported by kind, never a traceback
        result = {"ok": False, "kind": "error", "error": f"{type(err).__name__}: {str(err)[:300]}"}
    sys.stdout.write(json.dumps(result))


if __name__ == "__main__":
    main()
