"""The loader of the engines' generated tables (systems/engine_tables/): it reads the committed data files, refuses
one that is not what the generator wrote (naming it), stays small, and reads nothing until a table is used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hermetic import subprocess_env

from systems import engine_tables
from systems.engine_tables import DATA_DIR, EngineTableError, content_hash, load

ROOT = Path(__file__).resolve().parents[2]


def _copy_tables(into: Path) -> Path:
    for path in DATA_DIR.glob("*.json"):
        shutil.copy(path, into / path.name)
    return into


def test_a_copy_of_the_data_files_loads_the_same_tables(tmp_path):
    assert load(_copy_tables(tmp_path)) == load()
    assert "GptOssForCausalLM" in engine_tables.ARCHITECTURES["vllm==0.30.0"]
    assert "--context-length" in engine_tables.CLI_FLAGS["sglang==0.5.20"]


@pytest.mark.parametrize("edit", ["add an architecture", "change the wheel's sha256", "change the hash"])
def test_a_file_changed_after_generation_is_refused_naming_it(tmp_path, edit):
    path = _copy_tables(tmp_path) / "vllm-0.30.0.json"
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
