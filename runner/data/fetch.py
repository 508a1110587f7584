"""Every input of a profile from its public origin: ``python -m runner.data fetch PROFILE [--into DIR]``.

The profiles read their data under ``${DATA_DIR}`` (runner/spec.py; default ../shared/data). For each dataset the
profile names there (runner/data/convert.py), ``fetch`` downloads its origins at their pinned commit (GitHub's raw
files, https://raw.githubusercontent.com/OWNER/REPO/COMMIT/PATH, or a URL with its sha256), converts them to the
layout the profile reads and checks every file's sha256 against runner/data/manifest.tsv (hashes, sizes and origins
only; the data's licences stay the origins', one note per dataset is printed). A file whose sha256 differs is named in
one line and left as ``NAME.partial``, never used. Resumable: verified files are skipped, downloaded origins are kept
in ``DIR/.origins/`` (deleted once their dataset is verified) and a download cut short starts again.

    python -m runner.data fetch small --into ~/elmo-data     # then: DATA_DIR=~/elmo-data ./run_all.sh --profile small
    python -m runner.data check small --into DIR             # which files are there and verified, fetching nothing
    python -m runner.data verify-conversions --origins /work/.mirror   # conversions on local git snapshots

``verify-conversions`` runs each conversion on snapshots of the origin repositories (``DIR/OWNER+REPO/repo``, a git
repository holding the pinned commit; a URL origin as ``DIR/<its file name>``) and compares the outputs' sha256 with
the manifest, writing nothing: the byte-for-byte check of docs/data.md.
"""
import argparse
import hashlib
import http.client
import lzma
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

from runner.data.convert import DATASETS, UNCHANGED, Dataset
from runner.paths import REPO, data_dir
from runner.profile import SpecError, load_profile

MANIFEST = Path(__file__).with_name("manifest.tsv")
GITHUB_RAW = "https://raw.githubusercontent.com"


def read_manifest(path: Optional[Path] = None) -> Dict[str, dict]:
    """path under DATA_DIR -> {bytes, sha256, origin}."""
    rows, path = {}, path or MANIFEST
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 4 or not re.fullmatch(r"[0-9a-f]{64}", fields[2]) or not fields[1].isdigit():
            raise SpecError(f"{path}:{n}: expected path<TAB>bytes<TAB>sha256<TAB>origin, found {line[:80]!r}")
        rows[fields[0]] = {"bytes": int(fields[1]), "sha256": fields[2], "origin": fields[3]}
    return rows


def unit_of(path: str) -> Optional[str]:
    """The dataset a path under DATA_DIR belongs to (the longest unit that holds it)."""
    units = [u for u in DATASETS if path == u or path.startswith(u + "/")]
    return max(units, key=len) if units else None


def profile_units(profile_name: str) -> List[str]:
    """The datasets a profile reads: every ``${DATA_DIR}/...`` value in its file (knobs, stages, probe args)."""
    profile, path = load_profile(profile_name)
    found = []
    for value in re.findall(r"\$\{DATA_DIR\}/([^\"\s]*)", path.read_text(encoding="utf-8")):
        unit = unit_of(value) or next((u for u in DATASETS if u.startswith(value.rstrip("/") + "/")), None)
        if unit is None:
            raise SpecError(f"{path}: ${{DATA_DIR}}/{value} is in no dataset of runner/data/convert.py")
        if unit not in found:
            found.append(unit)
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verified(root: Path, rel: str, row: dict) -> bool:
    path = root / rel
    return path.is_file() and path.stat().st_size == row["bytes"] and sha256(path) == row["sha256"]


# ---------------------------------------------------------------- origins: download (fetch) or git snapshot (verify)

def split_origin(origin: str):
    """'owner/repo@commit:path' -> (owner/repo, commit, path); a URL -> (None, sha256 or None, url)."""
    if "://" in origin:
        url, _, pin = origin.partition("#sha256=")
        return None, pin or None, url
    repo, _, rest = origin.partition("@")
    commit, _, path = rest.partition(":")
    return repo, commit, path


def origin_url(origin: str, base: str) -> str:
    repo, commit, path = split_origin(origin)
    if repo is None:
        return path
    return f"{base.rstrip('/')}/{repo}/{commit}/{urllib.parse.quote(path)}"


# Downloads that fail for a while (a refused connection, HTTP 429 or 5xx, a body cut short) are tried again, TRIES in
# all, after waits that double from ELMO_DATA_RETRY_DELAY seconds (default 2: 2, 4, 8 s); each retry is one line.
TRIES = 4
sleep = time.sleep  # the waits between tries (tests record them instead)
_TRANSIENT = (ConnectionRefusedError, ConnectionResetError, ConnectionAbortedError, TimeoutError,
              http.client.IncompleteRead)


def retry_delay() -> float:
    value = os.environ.get("ELMO_DATA_RETRY_DELAY", "2")
    try:
        delay = float(value)
    except ValueError:
        delay = math.nan
    if not (math.isfinite(delay) and delay >= 0):
        raise SpecError(f"ELMO_DATA_RETRY_DELAY: expected a number of seconds >= 0 (the first wait before a download "
                        f"is tried again; default 2), found {value!r}")
    return delay


# What a download must start with, by the end of its name: an HTML page served with status 200 (a proxy's, a login or
# an error page) where an archive or JSON was expected is named as such, and not kept.
_KINDS = ((".zip", "a zip archive", (b"PK\x03\x04", b"PK\x05\x06")), (".gz", "a gzip file", (b"\x1f\x8b",)),
          (".tgz", "a gzip file", (b"\x1f\x8b",)), (".xz", "an xz file", (b"\xfd7zXZ\x00",)),
          (".deb", "a Debian package (ar archive)", (b"!<arch>\n",)), (".json", "JSON", (b"{", b"[")))


def _is_html(head: bytes) -> bool:
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return start.startswith(b"<!doctype html") or start.startswith(b"<html")


def arrival_problem(path: Path, name: str, expected: Optional[dict] = None) -> Optional[str]:
    """What is wrong with a download of the file ``name`` just written to ``path``, or None: an HTML page, or not
    the kind of file its name says (zip, gzip, xz, .deb, JSON), or (``expected``: the manifest's row of the file
    it is copied to unchanged) another size or sha256."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(512)
    kind = next(((what, magic) for end, what, magic in _KINDS if name.lower().endswith(end)), None)
    html = _is_html(head) and not name.lower().endswith((".html", ".htm"))
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n") if kind and kind[0] == "JSON" else head  # JSON: after spaces
    if html or (kind and not start.startswith(kind[1])):
        what = kind[0] if kind else f"the data file {name}"
        found = (f"an HTML page ({size:,} bytes: an error, login or proxy page served as the file?)" if html
                 else f"{size:,} bytes starting {head[:12]!r}")
        return f"expected {what}, found {found}"
    if expected is not None:
        why = f"(the bytes of {expected['path']} in {MANIFEST.name}, which uses it unchanged)"
        if size != expected["bytes"]:
            return f"{size:,} bytes, expected {expected['bytes']:,} {why}"
        if sha256(path) != expected["sha256"]:
            return f"sha256 {sha256(path)[:16]}..., expected {expected['sha256'][:16]}... {why}"
    return None


class Downloads:
    """get(origin) -> bytes, each origin downloaded once into ``cache`` (resumable: a complete file is kept, a
    download cut short is a ``.part`` file started again). Each download is checked as it arrives (arrival_problem,
    with ``expected``: origin -> the manifest row of the file it is copied to unchanged) and, failing, deleted; one
    that fails for a while is tried again (TRIES in all, waits doubling from ``delay`` seconds)."""

    def __init__(self, cache: Path, base: str = GITHUB_RAW, expected: Optional[Dict[str, dict]] = None,
                 tries: int = TRIES, delay: Optional[float] = None):
        self.cache, self.base, self.used = cache, base, set()  # used: the local copies read so far
        self.expected, self.tries = expected or {}, tries
        self.delay = retry_delay() if delay is None else delay

    def clear(self, paths) -> None:
        """Deletes these local copies (their datasets are made and verified) and the folders they leave empty."""
        for path in paths:
            path.unlink(missing_ok=True)
            for folder in path.parents:  # the folders left empty, up to the cache
                if folder == self.cache or not folder.is_relative_to(self.cache) or any(folder.iterdir()):
                    break
                folder.rmdir()

    def local(self, origin: str) -> Path:
        repo, commit, path = split_origin(origin)
        if repo is None:
            return self.cache / "url" / path.rsplit("/", 1)[-1]
        return self.cache / repo.replace("/", "+") / commit / path

    def __call__(self, origin: str) -> bytes:
        target = self.local(origin)
        if not target.is_file():
            self.download(origin, target)
        data = target.read_bytes()
        self.used.add(target)
        pin = split_origin(origin)[1] if split_origin(origin)[0] is None else None
        if pin and hashlib.sha256(data).hexdigest() != pin:
            target.unlink()
            raise SpecError(f"{origin_url(origin, self.base)}: sha256 {hashlib.sha256(data).hexdigest()}, expected "
                            f"{pin}; deleted")
        return data

    def download(self, origin: str, target: Path) -> None:
        url = origin_url(origin, self.base)
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(target.name + ".part")
        began = time.time()
        for attempt in range(1, self.tries + 1):
            try:
                why = self._get(url, part)
            except urllib.error.HTTPError as e:  # an answer: only "too many requests" and server errors pass
                part.unlink(missing_ok=True)
                if e.code != 429 and e.code < 500:
                    raise SpecError(f"download {url}: {e}") from None
                why = f"HTTP {e.code} {e.reason}"
            except (OSError, http.client.HTTPException) as e:
                part.unlink(missing_ok=True)
                reason = getattr(e, "reason", e)  # urlopen's URLError holds the socket's error
                if not isinstance(reason, _TRANSIENT) and not isinstance(e, _TRANSIENT):
                    raise SpecError(f"download {url}: {e}") from None
                why = str(reason) if isinstance(e, urllib.error.URLError) else f"{type(e).__name__}: {e}"
            if why is None:
                break
            if attempt == self.tries:
                raise SpecError(f"download {url}: {why}, {self.tries} tries; run the same command again later")
            wait = self.delay * 2 ** (attempt - 1)
            print(f"  {url}: {why}; retry {attempt} of {self.tries - 1} in {wait:g} s", flush=True)
            sleep(wait)
        repo, pin, _ = split_origin(origin)
        if repo is None and pin:  # a URL with its sha256: that says it all (and is said as __call__ says it)
            digest = sha256(part)
            problem = None if digest == pin else f"sha256 {digest}, expected {pin}"
        else:
            problem = arrival_problem(part, urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1],
                                      self.expected.get(origin))
        if problem:
            part.unlink()
            raise SpecError(f"download {url}: {problem}; deleted")
        os.replace(part, target)
        print(f"  got {origin} ({target.stat().st_size / 1e6:.1f} MB, {time.time() - began:.0f} s)", flush=True)

    @staticmethod
    def _get(url: str, part: Path) -> Optional[str]:
        """``url`` into ``part``; None once whole, or why to try again (fewer bytes than its Content-Length)."""
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
            declared = response.headers.get("Content-Length", "")
        got = part.stat().st_size
        if declared.isdigit() and got < int(declared):
            part.unlink()
            return f"cut short ({got:,} of {int(declared):,} bytes)"
        return None


class Snapshots:
    """get(origin) -> bytes from local git snapshots: ``origins/OWNER+REPO/repo`` (bare, or with .git), and a URL
    origin's file as ``origins/<its name>``."""

    def __init__(self, origins: Path):
        self.origins = origins

    def __call__(self, origin: str) -> bytes:
        repo, commit, path = split_origin(origin)
        if repo is None:
            local = self.origins / path.rsplit("/", 1)[-1]
            if not local.is_file():
                raise SpecError(f"{origin}: no {local}")
            return local.read_bytes()
        git = self.origins / repo.replace("/", "+") / "repo"
        git = git / ".git" if (git / ".git").is_dir() else git
        done = subprocess.run(["git", "--git-dir", str(git), "show", f"{commit}:{path}"], capture_output=True)
        if not done.returncode:
            return done.stdout
        # A snapshot may list a large file without its bytes: then a copy beside it counts if it is that very blob
        # (git's blob id, sha1 of "blob SIZE\0" + bytes, as the pinned commit's tree names it).
        blob = subprocess.run(["git", "--git-dir", str(git), "rev-parse", f"{commit}:{path}"], capture_output=True,
                              text=True).stdout.strip()
        local = self.origins / path.rsplit("/", 1)[-1]
        data = local.read_bytes() if blob and local.is_file() else b""
        if data and hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob:
            return data
        raise SpecError(f"{origin}: not in {git} ({done.stderr.decode(errors='replace').strip()[:80]}) and no "
                        f"{local} with its blob id {blob or '?'}")


# ---------------------------------------------------------------- fetch

def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# what a conversion raises on origins that are not what it reads (a zip that is not one was a traceback)
CONVERSION_ERRORS = (SpecError, ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile, tarfile.TarError,
                     lzma.LZMAError)


def fetch_unit(dataset: Dataset, rows: Dict[str, dict], root: Path, get) -> List[str]:
    """Makes one dataset under ``root``; returns one line per file that failed (none: all verified)."""
    wanted = {rel: row for rel, row in rows.items() if unit_of(rel) == dataset.unit}
    todo = [rel for rel, row in wanted.items() if not verified(root, rel, row)]
    print(f"{dataset.unit} (licence: {dataset.licence}): {len(todo) or 'no'} files of {len(wanted)} to make",
          flush=True)
    if not todo:
        return []
    if dataset.convert is None:
        return [f"{dataset.unit}: not made: {dataset.why} (docs/data.md)"]
    began = time.time()
    try:
        made = dataset.convert(get)
    except CONVERSION_ERRORS as e:
        return [f"{dataset.unit}: {e}"]
    failed = []
    for rel in wanted:
        if rel not in made:
            failed.append(f"{root / rel}: the conversion did not make it")
    for rel, data in made.items():
        row, target = wanted.get(rel), root / rel
        digest = hashlib.sha256(data).hexdigest()
        if row is None:
            failed.append(f"{target}: made but not in {MANIFEST.name}; not written")
        elif digest != row["sha256"]:
            write_atomic(target.with_name(target.name + ".partial"), data)
            target.unlink(missing_ok=True)
            failed.append(f"{target}: sha256 {digest[:16]}..., expected {row['sha256'][:16]}... ({row['origin'][:60]}"
                          f"...); left as {target.name}.partial, not used")
        else:
            write_atomic(target, data)
            target.with_name(target.name + ".partial").unlink(missing_ok=True)
            print(f"  {rel}: ok ({len(data) / 1e6:.1f} MB)", flush=True)
    print(f"{dataset.unit}: {len(made) - len(failed)} files written and verified ({time.time() - began:.0f} s)")
    return failed


def fetch(profile: str, into: Path, base: str = GITHUB_RAW, keep_origins: bool = False) -> int:
    rows, units = read_manifest(), profile_units(profile)
    cache = into / ".origins"
    expected = {origin: {**rows[rel], "path": rel} for origin, rel in UNCHANGED.items() if rel in rows}
    get = Downloads(cache, base, expected)
    failed, incomplete, done, kept = [], 0, set(), set()
    for unit in units:
        lines = fetch_unit(DATASETS[unit], rows, into, get)
        failed, incomplete = failed + lines, incomplete + bool(lines)
        (kept if lines else done).update(get.used)  # a download another dataset shares (WordNet's) is read once
        get.used = set()
    if not keep_origins:
        get.clear(done - kept)  # those of an unfinished dataset stay for the next try
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    hint = "" if into.resolve() == (REPO / data_dir()).resolve() else f"; use it with DATA_DIR={into}"
    print(f"{profile}: {len(units) - incomplete} of {len(units)} datasets complete in "
          f"{into}{hint}")
    return 1 if failed else 0


def fetch_into_data_dir(profile: str) -> int:
    """``python -m runner --fetch-data``: fetch into DATA_DIR (relative to the repository)."""
    into = Path(data_dir())
    try:
        return fetch(profile, into if into.is_absolute() else REPO / into,
                     os.environ.get("ELMO_DATA_BASE_URL", GITHUB_RAW))
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def check(profile: str, into: Path) -> int:
    rows, bad = read_manifest(), 0
    for unit in profile_units(profile):
        wanted = [rel for rel in rows if unit_of(rel) == unit]
        ok = sum(verified(into, rel, rows[rel]) for rel in wanted)
        bad += ok < len(wanted)
        print(f"{unit}: {ok} of {len(wanted)} files verified in {into}")
    return 1 if bad else 0


# ---------------------------------------------------------------- verify-conversions

def verify_conversions(origins: Path, units: Optional[List[str]] = None) -> int:
    """Each conversion on the origins' own bytes (git snapshots): its outputs' sha256 against the manifest."""
    rows, bad = read_manifest(), 0
    print("| dataset | files | byte for byte | note |\n|---|---|---|---|")
    for unit, dataset in DATASETS.items():
        if units and unit not in units:
            continue
        wanted = [rel for rel in rows if unit_of(rel) == unit]
        if dataset.convert is None:
            print(f"| {unit} | {len(wanted)} | not checked | {dataset.why} |")
            continue
        try:
            made = dataset.convert(Snapshots(origins))
        except CONVERSION_ERRORS as e:
            print(f"| {unit} | {len(wanted)} | not checked | origin not here: {str(e)[:150]} |")
            continue
        same = [rel for rel in wanted if rel in made and hashlib.sha256(made[rel]).hexdigest() == rows[rel]["sha256"]]
        differ = sorted(set(wanted) - set(same)) + sorted(set(made) - set(wanted))
        bad += bool(differ)
        print(f"| {unit} | {len(wanted)} | {'yes' if not differ else f'{len(same)} of {len(wanted)}'} | "
              f"{'differ: ' + ', '.join(differ[:5]) if differ else ''} |")
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.data", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("fetch", "download, convert and verify every dataset the profile reads"),
                       ("check", "say which of the profile's files are there and verified; fetch nothing")):
        p = sub.add_parser(name, help=text)
        p.add_argument("profile", help="a profile name (runner/profiles/NAME.json) or path")
        p.add_argument("--into", default=None, help="the data root to fill (default: DATA_DIR, else ../shared/data; "
                                                    "relative to the repository)")
        if name == "fetch":
            p.add_argument("--base-url", default=os.environ.get("ELMO_DATA_BASE_URL", GITHUB_RAW),
                           help=f"where OWNER/REPO/COMMIT/PATH is served (default {GITHUB_RAW})")
            p.add_argument("--keep-origins", action="store_true", help="keep the downloads in DIR/.origins/")
    p = sub.add_parser("verify-conversions", help="run the conversions on local git snapshots of the origins")
    p.add_argument("--origins", required=True, help="folder of snapshots: OWNER+REPO/repo (git) and URL files")
    p.add_argument("--only", nargs="*", default=None, help="datasets to check (default: all)")
    args = parser.parse_args(argv)
    try:
        if args.command == "verify-conversions":
            return verify_conversions(Path(args.origins), args.only)
        into = Path(args.into).resolve() if args.into else Path(data_dir())  # DATA_DIR: relative to the repository
        into = into if into.is_absolute() else REPO / into
        if args.command == "check":
            return check(args.profile, into)
        return fetch(args.profile, into, args.base_url, args.keep_origins)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

