// C API: closures over C callbacks, and applying them.
#include "capi/capi.h"

using namespace kiln;
using namespace kiln::capi;

namespace {

// A C function pointer with a payload; the payload's destructor runs when the
// last shared_ptr to this object goes, on that thread.
class FuncClosure final : public Closure {
 public:
  FuncClosure(kiln_closure_fn fn, void* payload, void (*dtor)(void*)) : fn_(fn), payload_(payload), dtor_(dtor) {}
  FuncClosure(const FuncClosure&) = delete;
  FuncClosure& operator=(const FuncClosure&) = delete;
  ~FuncClosure() override {
    if (dtor_) dtor_(payload_);
  }

  std::vector<Array> call(const std::vector<Array>& inputs) const override {
    kiln_vector_array_s in{inputs};
    kiln_vector_array out = new kiln_vector_array_s{};
    struct Release {
      kiln_vector_array* h;
      ~Release() { delete *h; }  // the callback may have replaced *h; free whatever is there
    } release{&out};
    set_last_error("");
    int rc = fn_(&out, &in, payload_);
    if (rc != 0) {
      std::string msg = last_error();
      if (msg.empty()) msg = detail::concat("[closure] callback returned ", rc);
      throw Error(msg);
    }
    if (!out) return {};
    for (size_t i = 0; i < out->v.size(); ++i) {
      if (!out->v[i].valid()) fail("closure", "output ", i, " is an empty array handle");
    }
    return std::move(out->v);
  }

 private:
  kiln_closure_fn fn_;
  void* payload_;
  void (*dtor_)(void*);
};

}  // namespace

extern "C" {

int kiln_closure_new_func(kiln_closure* out, kiln_closure_fn fn) {
  return kiln_closure_new_func_payload(out, fn, nullptr, nullptr);
}

int kiln_closure_new_func_payload(kiln_closure* out, kiln_closure_fn fn, void* payload, void (*dtor)(void*)) {
  bool owned = false;  // true once a FuncClosure owns the payload and will run dtor
  int rc = guard([&] {
    const char* name = "kiln_closure_new_func_payload";
    check_out(name, out);
    if (!fn) fail(name, "null function");
    auto* raw = new FuncClosure(fn, payload, dtor);
    owned = true;
    std::shared_ptr<const Closure> c(raw);  // deletes raw (running dtor) if it throws
    if (*out)
      (*out)->c = std::move(c);
    else
      *out = new kiln_closure_s{std::move(c)};  // on bad_alloc, c's release runs dtor
  });
  if (rc != 0 && !owned && dtor) dtor(payload);
  return rc;
}

int kiln_closure_set(kiln_closure* out, const kiln_closure src) {
  return guard([&] {
    check_out("kiln_closure_set", out);
    auto c = get("kiln_closure_set", src);
    if (*out)
      (*out)->c = std::move(c);
    else
      *out = new kiln_closure_s{std::move(c)};
  });
}

int kiln_closure_free(kiln_closure c) {
  return guard([&] { delete c; });
}

int kiln_closure_apply(kiln_vector_array* out, const kiln_closure c, const kiln_vector_array in) {
  return guard([&] {
    const char* fn = "kiln_closure_apply";
    check_out(fn, out);
    std::shared_ptr<const Closure> keep = get(fn, c);  // alive for the call even if the handle is reassigned
    put(out, keep->call(get(fn, in)));
  });
}

}  // extern "C"
