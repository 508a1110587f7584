"""Which device a command runs on, and whether the installed torch can run kernels there.

A torch build carries compiled kernels (cubins, ``sm_XY``) for some GPU generations and PTX (``compute_XY``) that the
driver can compile for newer ones. CUDA's compatibility rules: a cubin for ``sm_XY`` runs on a GPU of the same major
version X and minor version >= Y; PTX for ``compute_XY`` runs on any GPU of capability >= X.Y. A GPU that neither
covers (torch 1.12's CUDA 10.2 build, sm_37-sm_75, on an A100 sm_80 or H100 sm_90) fails at the first kernel.
"""
from typing import Iterable, Optional, Tuple


def kernels_run_on(capability: Tuple[int, int], arch_list: Iterable[str]) -> bool:
    """True if a torch build with ``arch_list`` (torch.cuda.get_arch_list()) can run kernels on a GPU of compute
    capability ``capability`` (torch.cuda.get_device_capability())."""
    major, minor = capability
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        if not number.isdigit() or len(number) < 2:
            continue
        a_major, a_minor = int(number[:-1]), int(number[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what the platform module says)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        return platform.processor() or "unknown CPU"


def cuda_problem(index: int = 0) -> Optional[str]:
    """None if torch can run kernels on GPU ``index``; otherwise a one-line reason."""
    import torch

    if not torch.cuda.is_available():
        return (f"no CUDA GPU is usable by torch {torch.__version__} (built for CUDA {torch.version.cuda or 'none'}): "
                "torch.cuda.is_available() is False")
    count = torch.cuda.device_count()
    if index >= count:
        return f"GPU {index} was asked for, but torch sees {count} GPU(s) (CUDA_VISIBLE_DEVICES?)"
    capability = torch.cuda.get_device_capability(index)
    arch_list = torch.cuda.get_arch_list()
    if not kernels_run_on(capability, arch_list):
        return (f"GPU {index} ({torch.cuda.get_device_name(index)}, "
                f"compute capability {capability[0]}.{capability[1]}) "
                f"cannot run this torch's kernels: torch {torch.__version__} was built for {' '.join(arch_list)}; "
                "install a torch build with kernels for this GPU (see docs/environment.md)")
    return None


def describe(device: str) -> str:
    """One line naming the device a command uses, e.g. for the first line of its output."""
    import torch

    if device.startswith("cuda"):
        index = int(device.split(":")[1]) if ":" in device else 0
        return (f"device {device}: {torch.cuda.get_device_name(index)} (compute capability "
                f"{'.'.join(map(str, torch.cuda.get_device_capability(index)))}), torch {torch.__version__}")
    return f"device cpu: {torch.get_num_threads()} thread(s), torch {torch.__version__}"


def resolve(device: Optional[str]) -> Tuple[str, str]:
    """(the device a command runs on, a one-line description of it for the start of its output).

    ``None`` picks the first GPU if torch can run kernels on it, else the CPU (and the line says why no GPU). A GPU
    asked for by name (``cuda``, ``cuda:1``) that torch cannot use raises ElmoInputError with the one-line reason.
    """
    from elmo_module.errors import ElmoInputError

    if device is None:
        import torch

        problem = cuda_problem(0) if torch.cuda.device_count() else None
        if torch.cuda.device_count() and problem is None:
            return "cuda:0", describe("cuda:0")
        return "cpu", describe("cpu") + (f" (GPU not used: {problem})" if problem else "")
    if device == "cpu":
        return device, describe(device)
    kind, _, index = device.partition(":")
    if kind != "cuda" or not (index == "" or index.isdigit()):
        raise ElmoInputError(f"--device must be cpu, cuda or cuda:N, found '{device}'")
    problem = cuda_problem(int(index or 0))
    if problem:
        raise ElmoInputError(f"--device {device}: {problem}")
    return device, describe(device)
