// Loading the network libraries (libfabric, libibverbs) when a communicator first needs the
// network, never at library load: a process that makes no inter-node communicator never maps them.
//
// Their providers may install signal handlers (libfabric's psm2/infinipath providers take SIGSEGV,
// SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM when they are loaded: a crash then exits with status
// 1 and leaves a backtrace file in the working directory). Every call that may load or initialise
// a provider runs under SignalHandlersKept, which puts the process's handlers back as they were.
#pragma once
#include <signal.h>
#include <string>

namespace mkccl {
namespace net {

// Saves the handlers of every catchable signal; the destructor restores any that changed (and logs
// which, at INFO).
class SignalHandlersKept {
 public:
  explicit SignalHandlersKept(const char* during);
  ~SignalHandlersKept();
  SignalHandlersKept(const SignalHandlersKept&) = delete;
  SignalHandlersKept& operator=(const SignalHandlersKept&) = delete;

 private:
  const char* during_;
  struct sigaction saved_[NSIG];
  bool have_[NSIG];
};

// dlopen of the first of `names` that loads (RTLD_NOW | RTLD_LOCAL), handlers kept. nullptr with *why
// (every name tried and dlerror's last word) when none does.
void* netLibOpen(const char* const* names, int count, std::string* why);
// dlsym; nullptr (and *why names the symbol) when absent.
void* netLibSym(void* lib, const char* name, std::string* why);

}  // namespace net
}  // namespace mkccl
