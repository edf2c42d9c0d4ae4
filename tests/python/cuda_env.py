"""Settings the Python GPU tests need before CUDA starts in the process (imported first by run.py,
which asks torch for a device before pytest starts, and by conftest.py, for pytest run directly).
CUDA reads them once, when it initialises, so they must come before any torch.cuda call.

- CUDA_DEVICE_MAX_CONNECTIONS=32: ranks of one process sharing a GPU share its context's hardware
  queues; with the default 8, a rank's kernel that waits for a peer can sit in a queue ahead of the
  peer's work (tests/common/rank_threads.cc says more).
- CUDA_MODULE_LOADING=EAGER: every kernel loaded when the context starts. A lazy load at a first
  launch may wait for the context's running kernels, one of which can be a peer rank's persistent
  kernel waiting for the very launch the load holds up.

Values the user set stand."""
import os

os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")
