// Thread-local last error and the process-wide error handler.
#include <mutex>

#include "capi/capi.h"

namespace kiln::capi {

namespace {

std::string& slot() noexcept {
  thread_local std::string msg;
  return msg;
}

struct Handler {
  kiln_error_handler_fn fn;
  void* data;
  void (*dtor)(void*);
  Handler(kiln_error_handler_fn f, void* d, void (*x)(void*)) : fn(f), data(d), dtor(x) {}
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;
  ~Handler() {
    if (dtor) dtor(data);
  }
};

std::mutex g_handler_mu;  // guards g_handler
std::shared_ptr<const Handler> g_handler;  // the installed handler, or null

}  // namespace

void set_last_error(const char* msg) noexcept {
  try {
    slot() = msg ? msg : "";
  } catch (...) {
    slot().clear();  // out of memory for the copy: an empty message beats none at all
  }
}

const std::string& last_error() noexcept { return slot(); }

void report(const char* msg) noexcept {
  set_last_error(msg);
  std::shared_ptr<const Handler> h;
  {
    std::lock_guard<std::mutex> lock(g_handler_mu);
    h = g_handler;
  }
  if (h && h->fn) h->fn(slot().c_str(), h->data);
  // Dropping h here may run the handler's dtor if it was replaced meanwhile.
}

}  // namespace kiln::capi

using namespace kiln::capi;

extern "C" {

const char* kiln_last_error(void) { return last_error().c_str(); }

int kiln_clear_error(void) {
  set_last_error("");
  return 0;
}

int kiln_set_error(const char* msg) {
  set_last_error(msg);
  return 0;
}

int kiln_set_error_handler(kiln_error_handler_fn fn, void* data, void (*dtor)(void*)) {
  std::shared_ptr<const Handler> old;
  int rc = guard([&] {
    std::shared_ptr<const Handler> h;
    try {
      if (fn) h = std::make_shared<const Handler>(fn, data, dtor);
    } catch (...) {
      if (dtor) dtor(data);
      throw;
    }
    if (!fn && dtor) dtor(data);  // nothing to install: data is released now
    std::lock_guard<std::mutex> lock(g_handler_mu);
    old = std::move(g_handler);
    g_handler = std::move(h);
  });
  return rc;  // `old` is released outside the lock
}

}  // extern "C"
