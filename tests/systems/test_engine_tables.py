"""The loader of the engines' generated tables (systems/engine_tables/): it reads the committed data files, refuses
one that is not what the generator wrote (naming it), stays small, and reads nothing until a table is used."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hermetic import subprocess_env

from systems import engine_tables
from systems.engine_tables import DATA_DIR, EngineTableError, content_hash, load
from systems.images_current import SGLANG_ENGINE, VLLM_ENGINE

ROOT = Path(__file__).resolve().parents[2]


def _copy_tables(into: Path) -> Path:
    for path in DATA_DIR.glob("*.json"):
        shutil.copy(path, into / path.name)
    return into


def test_a_copy_of_the_data_files_loads_the_same_tables(tmp_path):
    assert load(_copy_tables(tmp_path)) == load()
    assert "GptOssForCausalLM" in engine_tables.ARCHITECTURES[VLLM_ENGINE]
    assert "--context-length" in engine_tables.CLI_FLAGS[SGLANG_ENGINE]


@pytest.mark.parametrize("edit", ["add an architecture", "change the wheel's sha256", "change the hash"])
def test_a_file_changed_after_generation_is_refused_naming_it(tmp_path, edit):
    path = _copy_tables(tmp_path) / f"{VLLM_ENGINE.replace('==', '-')}.json"
    data = json.loads(path.read_text())
    if edit == "add an architecture":
        data["tables"]["architectures"]["values"].append("MadeUpForCausalLM")
    elif edit == "change the wheel's sha256":
        data["wheels"][0]["sha256"] = "0" * 64
    else:
        data["content_sha256"] = "0" * 64
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    with pytest.raises(EngineTableError) as err:
        load(tmp_path)
    assert str(err.value).startswith(f"{path}: content_sha256 ")
    assert "does not match its content" in str(err.value) and "make engine-tables" in str(err.value)


def test_an_unreadable_file_an_empty_folder_and_an_unknown_table_are_refused_by_name(tmp_path):
    with pytest.raises(EngineTableError, match=rf"^{tmp_path}: no engine table files"):
        load(tmp_path)
    broken = tmp_path / "broken.json"
    broken.write_text('{"tables": ')
    with pytest.raises(EngineTableError, match=rf"^{broken}: not a readable engine table"):
        load(tmp_path)
    broken.write_text("[]")
    with pytest.raises(EngineTableError, match=rf"^{broken}: no `tables` and `wheels`"):
        load(tmp_path)
    data = {"engine": "x==1", "tables": {"colours": {"read_from": "x.py", "values": []}}, "wheels": [{}]}
    broken.write_text(json.dumps({**data, "content_sha256": content_hash(data)}))
    with pytest.raises(EngineTableError, match=rf"^{broken}: unknown table 'colours'"):
        load(tmp_path)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'ARCHITECTURE'"):
        _ = engine_tables.ARCHITECTURE


def test_the_loader_is_small_and_the_data_files_are_in_the_repository():
    """Data, not code: the loader stays under 150 lines, and every data file is one git tracks (not ignored), so a
    fresh clone has the tables."""
    loader = DATA_DIR / "__init__.py"
    assert len(loader.read_text().splitlines()) < 150
    assert not (ROOT / "systems" / "architectures.py").exists()
    git = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "systems/engine_tables"]
    listed = subprocess.check_output(git, cwd=ROOT, text=True).split()
    data_files = sorted(p.relative_to(ROOT).as_posix() for p in DATA_DIR.glob("*.json"))
    assert len(data_files) >= 7 and set(data_files) <= set(listed)


def test_importing_the_systems_that_use_the_tables_reads_no_data_file():
    """So tools/generate_architectures.py, which imports systems, can rewrite a file the loader refuses."""
    script = (
        "import systems.checks, systems.model_support, systems.engine_tables as t; "
        "print(t.load.cache_info().currsize); t.ARCHITECTURES; print(t.load.cache_info().currsize)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["0", "1"]


def test_the_generator_writes_the_same_bytes_each_time_and_the_loader_reads_them(tmp_path):
    """tools/generate_architectures.py's data_file on a stand-in wheel (a zip of one file): sorted, stable, stamped,
    and accepted by the loader with the wheel named in SOURCES."""
    from tools.generate_architectures import Wheel, data_file

    path = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("vllm/registry.py", "stand-in")
    tables = {
        "architectures": ("vllm/registry.py", frozenset({"BForCausalLM", "AForCausalLM"})),
        "removed": ("vllm/registry.py _PREVIOUSLY_SUPPORTED_MODELS", {"ZModel": "0.2", "YModel": "0.1"}),
        "cli_flags": ("vllm/engine/arg_utils.py", frozenset({"--b", "--a"})),
    }
    text = data_file("vllm==9.9.9", [Wheel("vllm", "9.9.9", path)], tables)
    assert text == data_file("vllm==9.9.9", [Wheel("vllm", "9.9.9", path)], dict(reversed(tables.items())))
    folder = tmp_path / "tables"
    folder.mkdir()
    (folder / "vllm-9.9.9.json").write_text(text)
    loaded = load(folder)
    assert loaded.architectures == {"vllm==9.9.9": frozenset({"AForCausalLM", "BForCausalLM"})}
    assert loaded.cli_flags == {"vllm==9.9.9": frozenset({"--a", "--b"})}
    assert loaded.vllm_removed == {"vllm==9.9.9": {"YModel": "0.1", "ZModel": "0.2"}}
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.sources == {"vllm==9.9.9": f"{path.name} sha256:{digest} vllm/registry.py"}
    assert json.loads(text)["tables"]["architectures"]["values"] == ["AForCausalLM", "BForCausalLM"]


def test_each_committed_file_is_what_the_generator_writes_from_its_content():
    """The committed bytes are the generator's layout (indent, key order, sorted values, hash): a file re-saved by an
    editor or a formatter fails here, offline, not only in `make engine-tables-check`."""
    from tools.generate_architectures import data_file

    for path in sorted(DATA_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        wheels = [SimpleNamespace(record=record) for record in data["wheels"]]
        tables = {
            name: (table["read_from"], frozenset(v) if isinstance(v := table["values"], list) else v)
            for name, table in data["tables"].items()
        }
        assert path.read_text() == data_file(data["engine"], wheels, tables), path.name


def test_the_check_names_each_differing_missing_and_stray_file_and_the_write_removes_strays(tmp_path, monkeypatch):
    from tools import generate_architectures as generator

    folder = tmp_path / "systems" / "engine_tables"
    folder.mkdir(parents=True)
    monkeypatch.setattr(generator, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(generator, "DATA_DIR", folder)
    (folder / "same.json").write_text("1\n")
    (folder / "edited.json").write_text("2\n")
    (folder / "stray.json").write_text("3\n")
    wanted = {"same.json": "1\n", "edited.json": "two\n", "new.json": "4\n"}
    assert generator.compare(wanted) == [
        "systems/engine_tables/edited.json differs from what the wheels give: regenerate it (make engine-tables)",
        "systems/engine_tables/new.json is missing: regenerate it (make engine-tables)",
        "systems/engine_tables/stray.json comes from no wheel the tool reads: remove it",
    ]
    generator.write(wanted)
    assert {p.name: p.read_text() for p in folder.iterdir()} == wanted
    assert generator.compare(wanted) == []
