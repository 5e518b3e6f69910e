"""model.tar.gz: a build's files packed at the archive root, deterministically (the archive SageMaker extracts into
/opt/ml/model). model_build publishes it; local_runtime extracts adapter archives packed the same way."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path


class TarballError(Exception):
    """Packing failed (tar or the compressor exited non-zero); the message carries their error output."""


def choose_packer() -> str:
    """'tar+pigz' when tar and pigz are installed, else 'tarfile' (pure Python: faster than `tar | gzip`)."""
    if shutil.which("tar") and shutil.which("pigz"):
        return "tar+pigz"
    return "tarfile"


def pack_tarball(build_dir: Path, names: list[str], dest: Path, *, packer: str | None = None, level: int = 1) -> str:
    """Pack `names` (relative to build_dir) at the archive root into dest (.tar.gz); returns the packer used.

    SageMaker extracts model.tar.gz into /opt/ml/model, so files sit at the root of the archive.
    Deterministic: sorted names, mtime 0, owner 0:0, no timestamp in the gzip header.
    """
    packer = packer or choose_packer()
    names = sorted(names)
    if packer in ("tar+pigz", "tar+gzip"):
        gz = ["pigz", f"-{level}", "-n", "-c"] if packer == "tar+pigz" else ["gzip", f"-{level}", "-n", "-c"]
        tar = [
            "tar",
            "-C",
            str(build_dir),
            "--sort=name",
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--format=gnu",
            "-cf",
            "-",
            "--no-recursion",
            "--",
            *names,
        ]
        with open(dest, "wb") as out:
            t = subprocess.Popen(tar, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            z = subprocess.Popen(gz, stdin=t.stdout, stdout=out, stderr=subprocess.PIPE)
            assert t.stdout is not None
            t.stdout.close()  # z owns the pipe now, so tar gets SIGPIPE if z dies
            z_err = z.communicate()[1]
            t_err = t.stderr.read() if t.stderr else b""
            t.wait()
        if t.returncode or z.returncode:
            raise TarballError(f"packing {dest.name} failed: {(t_err + z_err).decode(errors='replace').strip()}")
        return packer
    if packer != "tarfile":
        raise ValueError(f"unknown packer {packer!r}")
    import gzip

    with (
        open(dest, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as gzf,
    ):
        with tarfile.open(fileobj=gzf, mode="w", format=tarfile.GNU_FORMAT) as archive:
            for name in names:
                info = archive.gettarinfo(str(build_dir / name), arcname=name)
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                with open(build_dir / name, "rb") as f:
                    archive.addfile(info, f)
    return packer


__all__ = ["TarballError", "choose_packer", "pack_tarball"]
