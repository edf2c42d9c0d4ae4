"""pytest setup: the package from the source tree (python/) unless PYTHONPATH names another."""
import os
import sys

# Before CUDA starts in this process (a test module's skip condition may start it while being
# collected): ranks of one process sharing a GPU need more hardware queues than the default 8 (their
# copy streams wait on memory), and every kernel loaded when the context starts (a lazy load at a
# first launch may wait for the running kernels, one of which can be a peer rank's waiting for that
# launch); tests/common/rank_threads.cc says more. Values set by the user stand.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
try:
    import mkccl  # noqa: F401  (an installed package or PYTHONPATH)
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
