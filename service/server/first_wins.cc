#include "service/server/first_wins.h"

namespace placement::server {

FirstWins::FirstWins() : claimed_(std::make_shared<std::atomic<bool>>(false)) {}

bool FirstWins::Claim() { return !claimed_->exchange(true); }

bool FirstWins::claimed() const { return claimed_->load(); }

}  // namespace placement::server
