"""pytest setup: the package from the source tree (python/) unless PYTHONPATH names another."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import cuda_env  # noqa: E402,F401  (before any torch.cuda call: cuda_env.py says why)
try:
    import mkccl  # noqa: F401  (an installed package or PYTHONPATH)
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
