// FunctionRef: a non-owning reference to a callable, for parameters that are only called during the
// call (parallel_for bodies). Unlike std::function it never allocates, whatever the lambda captures,
// which keeps a steady-state run free of heap allocations.
#pragma once
#include <type_traits>
#include <utility>

namespace nxrt::ep {

template <typename Sig>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT(implicit): lambdas convert at the call site
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...); }) {}

  R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace nxrt::ep
