"""A confirmatory profile's claims beside the exploratory profile's it replicates (the profile key ``replicates``: the
name of a profile whose ``results/<name>/claims.json`` holds its verdicts), and beside the paper's: one table,
``replication.md``. Each side is judged on its own seeds under its own correction; nothing is pooled."""
import json
from pathlib import Path
from typing import List, Optional

from runner.records import write_atomic
from runner.spec import SpecError


def _claims(path: Path, what: str) -> dict:
    try:
        return {c["id"]: c for c in json.loads(path.read_text())["claims"]}
    except FileNotFoundError:
        raise SpecError(f"{what}: {path} is missing (build that profile's results first: ./run_all.sh --profile "
                        f"{path.parent.name} --build-only)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise SpecError(f"{what}: {path} is not a claims file of the runner ({type(e).__name__}: {e})") from None


def _side(claim: Optional[dict]) -> List[str]:
    """(difference, seeds, verdict) cells of one side."""
    if claim is None:
        return ["—", "—", "not tested"]
    diff = claim.get("diff")
    seeds = claim.get("seeds") or []
    return [f"{diff:+.2f}" if isinstance(diff, (int, float)) else "—",
            ", ".join(map(str, seeds)) or "—",
            f"**{claim['verdict']}**" + (f" ({claim['why']})" if claim.get("why") else "")]


def replication_markdown(ours: dict, theirs: dict, replicated: str, provenance_lines: List[str]) -> str:
    lines = [f"# This replication beside the exploratory profile `{replicated}` and the paper", "",
             *provenance_lines, "",
             f"Each claim judged on its own seeds and its own family's Holm correction: this profile's "
             f"(claims.md) and `{replicated}`'s (results/{replicated}/claims.md). Differences in the claim's unit "
             f"(ELMo − baseline, on the claim's split), never pooled over the two profiles.", "",
             f"| claim | paper | `{replicated}`: difference | seeds | verdict | this profile: difference | seeds | "
             f"verdict | the same verdict |", "|---|---|---|---|---|---|---|---|---|"]
    agree = 0
    for claim_id, claim in ours.items():
        other = theirs.get(claim_id)
        same = other is not None and other["verdict"] == claim["verdict"]
        agree += same
        lines.append(f"| {claim['section']}: {claim['text']} | {claim['paper']} | "
                     + " | ".join(_side(other) + _side(claim)) + f" | {'yes' if same else 'no'} |")
    lines += ["", f"{agree} of {len(ours)} claims reach the same verdict in both profiles."]
    return "\n".join(lines) + "\n"


def write_replication(results_dir: Path, replicated: str, repo: Path, provenance_lines: List[str]) -> None:
    what = f"key 'replicates' ({replicated!r})"
    ours = _claims(results_dir / "claims.json", "this profile's claims")
    theirs = _claims(repo / "results" / replicated / "claims.json", what)
    write_atomic(results_dir / "replication.md", replication_markdown(ours, theirs, replicated, provenance_lines))
