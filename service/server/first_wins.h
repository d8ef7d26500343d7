// first_wins.h — which of several racing events ends a call: the first to claim it, exactly once.
//
// A reactor waiting for a job or an operation can be ended by whichever comes first: the job or
// operation is done (a worker's thread), the caller cancels (gRPC's thread), the server drains or its
// shutdown grace ends (the signal thread), or a timeout fires (gRPC's alarm). Exactly one of them may
// finish the call. Copies of a FirstWins share one claim, so listeners that may run after the call
// has ended hold a copy (a small shared block), never the reactor's state: a late event loses the
// claim and touches nothing else. The reactor stays alive until the winner has called Finish(), so the
// winner, and only the winner, may use it.
//
// Example:
//   FirstWins first_wins;
//   pending->OnDone([first_wins, this]() mutable {
//     if (first_wins.Claim()) OnAnswerReady();
//   });
//   void OnCancel() override { if (first_wins_.Claim()) Finish(cancelled); }
#ifndef PLACEMENT_SERVICE_SERVER_FIRST_WINS_H_
#define PLACEMENT_SERVICE_SERVER_FIRST_WINS_H_

#include <atomic>
#include <memory>

namespace placement::server {

class FirstWins {
 public:
  FirstWins();

  // True for exactly one call among this object and all its copies, on any thread.
  bool Claim();
  // Whether some event has claimed it already (e.g. to undo a registration that lost the race).
  bool claimed() const;

 private:
  // Sequentially consistent (the default): a reactor registers a callback, then checks claimed(),
  // while the winner claims, then unregisters it; only a total order guarantees one of them sees the
  // other.
  std::shared_ptr<std::atomic<bool>> claimed_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_FIRST_WINS_H_
