"""ctest's entry to the Python tests: run.py [--gpu] <test file> [pytest args...]

Exits 77 (ctest: Skipped), saying why, when pytest or torch is missing, or with --gpu when no
CUDA device is visible; otherwise pytest's own exit code (5, no test collected, also becomes 77).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_env  # noqa: E402,F401  (before torch.cuda.is_available() below starts CUDA)


def skip(why):
    print("skipped: " + why)
    sys.exit(77)


def main():
    args = sys.argv[1:]
    gpu = "--gpu" in args
    args = [a for a in args if a != "--gpu"]
    try:
        import pytest
    except ImportError:
        skip("pytest is not installed for %s (Debian: apt-get install python3-pytest)" % sys.executable)
    try:
        import torch
    except ImportError:
        skip("torch is not installed for %s (Debian: apt-get install python3-torch)" % sys.executable)
    if gpu and not torch.cuda.is_available():
        skip("no CUDA device visible to torch %s" % torch.__version__)
    here = os.path.dirname(os.path.abspath(__file__))
    rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "--rootdir", here] + args)
    sys.exit(77 if rc == 5 else int(rc))


if __name__ == "__main__":
    main()
