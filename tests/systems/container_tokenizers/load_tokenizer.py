"""Load built artifacts' tokenizers the way their containers do, with one container's library versions.

Run by tests/systems/test_container_tokenizers.py with the base venv's python (-I) of make_envs.py:
    load_tokenizer.py LIB_FOLDER TEXTS_JSON MODE:DIR [MODE:DIR ...]
LIB_FOLDER (a make_envs.py variant) goes first on sys.path. MODE: "auto" is transformers.AutoTokenizer.from_pretrained
(the Hugging Face toolkit, DJL/LMI, deepspeed-byoc), "tokenizers" is tokenizers.Tokenizer.from_file(DIR/tokenizer.json)
(tensorrt-byoc's handler). Prints one JSON line: the library versions, and per DIR either {"ok": true, "class",
"ids", "decoded", ...} (each text encoded without special tokens added, then decoded keeping special tokens) or
{"ok": false, "error"}.
"""

import json
import sys


def load(mode, directory, texts):
    if mode == "tokenizers":
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(f"{directory}/tokenizer.json")
        ids = [tokenizer.encode(text, add_special_tokens=False).ids for text in texts]
        return {
            "class": "tokenizers.Tokenizer",
            "ids": ids,
            "decoded": [tokenizer.decode(row, skip_special_tokens=False) for row in ids],
        }
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    return {
        "class": type(tokenizer).__name__,
        "ids": ids,
        "decoded": [tokenizer.decode(row, skip_special_tokens=False) for row in ids],
        "eos_token": tokenizer.eos_token,
        "special_tokens": sorted(tokenizer.all_special_tokens),  # 4.x lists extras as additional, 5.x as extra
        "chat_template": getattr(tokenizer, "chat_template", None),
    }


def main():
    folder, texts = sys.argv[1], json.loads(sys.argv[2])
    sys.path.insert(0, folder)
    import tokenizers

    versions = {"tokenizers": tokenizers.__version__}
    try:
        import transformers

        versions["transformers"] = transformers.__version__
    except ImportError:
        pass
    results = {}
    for spec in sys.argv[3:]:
        mode, directory = spec.split(":", 1)
        try:
            results[directory] = {"ok": True, **load(mode, directory, texts)}
        except Exception as err:  # the point: what a container would fail with
            results[directory] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    print(json.dumps({"versions": versions, "results": results}))


if __name__ == "__main__":
    main()
