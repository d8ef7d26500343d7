// Makes absl::Mutex, absl::CondVar and absl::Notification visible to ThreadSanitizer when the installed
// Abseil was built without it (Debian's libabsl is). Linked into every binary of a
// -DPLACEMENT_SANITIZE=thread build and nothing else (see tests/tsan/README.md).
//
// Why: TSan learns about a lock only from its own interceptors (pthread) or from __tsan_mutex_*
// annotations. Abseil's Mutex uses neither (it spins and calls futex directly) and annotates itself only
// when Abseil itself is compiled with -fsanitize=thread. Without this file every access guarded by an
// absl::Mutex — ours and gRPC's, whose grpc_core::Mutex is an absl::Mutex — is reported as a race.
//
// How: each function below has the exact signature of the Abseil member it replaces, so the executable
// defines the symbol and the dynamic linker binds every call to it — ours, gRPC's and Abseil's own calls
// between its functions all go through the PLT (checked with `readelf -r` on the Debian libraries). Each
// one tells TSan what the real function is about to do, calls the real one (found with
// dlsym(RTLD_NEXT)), and tells TSan it is done, in the same order Abseil's own TSan build annotates
// itself: release at the start of an unlock, acquire at the end of a lock. Between a pre_ and a post_
// annotation TSan ignores memory accesses, which covers the Condition functions Abseil evaluates while
// it holds (or is handing over) the lock.
//
// Some of these call each other through the PLT too (Debian's *WithTimeout functions forward to the
// *WithDeadline ones), so a per-thread depth counter lets only the outermost wrapper annotate; TSan
// would otherwise see one acquisition as two and report a double lock.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !defined(__SANITIZE_THREAD__) && !defined(__has_feature)
#error "absl_mutex_annotations.cc belongs only in -fsanitize=thread builds"
#endif

namespace {

#define PLACEMENT_TSAN_STR2(x) #x
#define PLACEMENT_TSAN_STR(x) PLACEMENT_TSAN_STR2(x)

// "_ZN4absl" + Abseil's inline namespace (e.g. "7debian3"); the rest of each mangled name refers to
// that namespace only through the substitution NS0_, so the tails below hold for any namespace name.
std::string MangledPrefix(bool is_const) {
  std::string prefix = is_const ? "_ZNK4absl" : "_ZN4absl";
#if ABSL_OPTION_USE_INLINE_NAMESPACE
  const std::string ns = PLACEMENT_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  prefix += std::to_string(ns.size()) + ns;
#endif
  return prefix;
}

// The real Abseil function behind `tail` (e.g. "5Mutex4LockEv"); aborts when it is missing, because a
// silently unannotated lock would bring the false reports back.
template <typename Fn>
Fn Real(const char* tail, bool is_const = false) {
  const std::string name = MangledPrefix(is_const) + tail;
  void* sym = dlsym(RTLD_NEXT, name.c_str());
  if (sym == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: %s not found: %s\n", name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;
constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;

// How many Mutex / CondVar wrappers this thread is inside; only the outermost one annotates.
thread_local int wrapper_depth = 0;

class DepthScope {
 public:
  DepthScope() : outermost_(wrapper_depth++ == 0) {}
  ~DepthScope() { --wrapper_depth; }
  bool outermost() const { return outermost_; }

 private:
  const bool outermost_;
};

// Wraps a call that returns holding the lock (Lock, LockWhen...): `flags` is 0 or kRead.
template <typename Call>
auto Locking(absl::Mutex* mu, unsigned flags, Call call) {
  DepthScope scope;
  if (!scope.outermost()) return call();
  __tsan_mutex_pre_lock(mu, flags);
  auto result = call();
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// Wraps a call that releases the lock (Unlock, ReaderUnlock).
template <typename Call>
void Unlocking(absl::Mutex* mu, unsigned flags, Call call) {
  DepthScope scope;
  if (!scope.outermost()) return call();
  __tsan_mutex_pre_unlock(mu, flags);
  call();
  __tsan_mutex_post_unlock(mu, flags);
}

// Wraps a try-lock: `call` returns whether it took the lock.
template <typename Call>
bool TryLocking(absl::Mutex* mu, unsigned flags, Call call) {
  DepthScope scope;
  if (!scope.outermost()) return call();
  __tsan_mutex_pre_lock(mu, flags | kTry);
  const bool locked = call();
  __tsan_mutex_post_lock(mu, flags | kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

// Wraps a call made while holding the lock that releases it and takes it again before returning
// (Await, CondVar::Wait): an unlock then a lock, as far as happens-before goes.
template <typename Call>
auto Relocking(absl::Mutex* mu, unsigned flags, Call call) {
  DepthScope scope;
  if (!scope.outermost()) return call();
  __tsan_mutex_pre_unlock(mu, flags);
  auto result = call();
  __tsan_mutex_post_unlock(mu, flags);
  __tsan_mutex_pre_lock(mu, flags);
  __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ---- Mutex: plain locking ----

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  Locking(this, 0, [&] { return (real(this), 0); });
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Locking(this, kRead, [&] { return (real(this), 0); });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  return TryLocking(this, 0, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  return TryLocking(this, kRead, [&] { return real(this); });
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Unlocking(this, 0, [&] { real(this); });
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Unlocking(this, kRead, [&] { real(this); });
}

Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("5MutexD2Ev");
  __tsan_mutex_destroy(this, 0);
  real(this);
}

// ---- Mutex: conditional locking (they return holding the lock, even on timeout) ----

void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Locking(this, 0, [&] { return (real(this, cond), 0); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locking(this, kRead, [&] { return (real(this, cond), 0); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, 0, [&] { return real(this, cond, deadline); });
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Locking(this, kRead, [&] { return real(this, cond, timeout); });
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Locking(this, kRead, [&] { return real(this, cond, deadline); });
}

// ---- Mutex: waiting while holding it ----
// Await* may be called holding a reader lock too; Abseil's annotations then use the read flag. We do
// not know which from here, and all our Await callers hold the writer lock (MutexLock).

void Mutex::Await(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  Relocking(this, 0, [&] { return (real(this, cond), 0); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Relocking(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Relocking(this, 0, [&] { return real(this, cond, deadline); });
}

// ---- CondVar ----

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Relocking(mu, 0, [&] { return (real(this, mu), 0); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return Relocking(mu, 0, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return Relocking(mu, 0, [&] { return real(this, mu, deadline); });
}

// ---- Notification: its flag is an atomic written inside the uninstrumented library ----

void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", /*is_const=*/true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", /*is_const=*/true);
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Time)>(
      "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", /*is_const=*/true);
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
