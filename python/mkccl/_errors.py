"""mkcclResult_t as a Python enum, and the exception a failed call raises."""
import enum


class Result(enum.IntEnum):
    """mkcclResult_t (include/mkccl.h)."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8


class MkcclError(RuntimeError):
    """A libmkccl call returned an error.

    result: the Result (mkcclResult_t); code: its int value; message: the library's own message
    (mkcclGetLastError), naming the argument or the cause; call: the C function that failed.
    """

    def __init__(self, result, message="", call=""):
        try:
            result = Result(result)
        except ValueError:
            pass
        self.result = result
        self.code = int(result)
        self.message = message
        self.call = call
        name = result.name.lower().replace("_", " ") if isinstance(result, Result) else "result %d" % result
        text = "%s failed: %s (%d)" % (call or "libmkccl", name, self.code)
        if message:
            text += ": " + message
        super().__init__(text)


def raise_for(lib, result, call, comm_ptr=None):
    """Raises MkcclError for a failed result, with the message of the calling thread (the library
    sets it on every failure), else the communicator's (its async error), else the code's name."""
    if result == Result.SUCCESS:
        return
    msg = lib.mkcclGetLastError(None)
    if not msg and comm_ptr:
        msg = lib.mkcclGetLastError(comm_ptr)
    msg = msg.decode("utf-8", "replace") if msg else ""
    if not msg:
        s = lib.mkcclGetErrorString(result)
        msg = s.decode("utf-8", "replace") if s else ""
    raise MkcclError(result, msg, call)
