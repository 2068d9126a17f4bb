"""A PEP 517 backend with no dependencies: one platform wheel holding the
package (kestrel/) and the hosted C library (kestrel/libkestrel.so), built
by scripts/install-capi.sh from the repository around this folder, or
taken from $KESTREL_LIBRARY."""
import base64
import hashlib
import os
import subprocess
import sysconfig
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAME, VERSION = "kestrel", "0.1.0"


def _library():
    given = os.environ.get("KESTREL_LIBRARY")
    if given:
        return Path(given).read_bytes()
    script = HERE.parent / "scripts" / "install-capi.sh"
    if not script.is_file():
        raise RuntimeError("kestrel: build from the Kestrel repository (pip install ./python) or set KESTREL_LIBRARY")
    with tempfile.TemporaryDirectory() as prefix:
        subprocess.run(["bash", str(script), prefix], check=True, stdout=subprocess.DEVNULL)
        return (Path(prefix) / "lib" / "libkestrel.so.1").read_bytes()


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = f"py3-none-{platform}"
    dist = f"{NAME}-{VERSION}.dist-info"
    files = {f"kestrel/{p.name}": p.read_bytes() for p in sorted((HERE / "kestrel").glob("*.py"))}
    files["kestrel/libkestrel.so"] = _library()
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
        "Summary: Kestrel from Python: Qwen inference through the C ABI, the hosted library bundled\n"
        "License: Apache-2.0\nRequires-Python: >=3.8\n"
    ).encode()
    files[f"{dist}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: kestrel build_backend\nRoot-Is-Purelib: false\nTag: {tag}\n"
    ).encode()
    record = [_record_line(p, d) for p, d in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{NAME}-{VERSION}-{tag}.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return name
