#pragma once
// Where each device stands in a run, for the driver (issue 47): one record a device in place
// of five sets. A device is in the run (`joined`), or has announced it leaves and still holds
// layers until a plan without it has moved them (`leaving`). Two faults mark it without
// changing that: a kill sent to it (`failing`: unannounced, so it stays in the run until the
// fault path finds it lost) and its actor seen stopping (`dead`). Apart from membership, a
// device may hold nothing of what the plan in force names (`wiped`: lost since the plan was
// applied, or it dropped layers in a diff that failed), until the next plan is applied.
#include <cstddef>
#include <map>
#include <set>
#include <vector>

namespace dynapar::control {

class membership {
 public:
  // Transitions.
  void join(int id);          // joins, or comes back after announcing it leaves
  void depart(int id);        // joined -> leaving
  void kill_sent(int id);     // failing
  void stopped(int id);       // dead
  void retire(int id);        // leaving -> out of the run (its flags stay until forgotten)
  void forget(int id);        // recovered from: nothing of it is left
  void wipe(int id) { wiped_.insert(id); }
  void set_wiped(std::set<int> ids) { wiped_ = std::move(ids); }
  void plan_applied() { wiped_.clear(); }

  // Questions.
  bool joined(int id) const { return is(id, where::joined); }
  bool leaving(int id) const { return is(id, where::leaving); }
  bool failing(int id) const { return flag(id, &record::failing); }
  bool dead(int id) const { return flag(id, &record::dead); }
  bool wiped(int id) const { return wiped_.count(id) > 0; }
  std::vector<int> joined_ids() const { return ids(where::joined); }    // ascending
  std::vector<int> leaving_ids() const { return ids(where::leaving); }  // ascending
  std::size_t joined_count() const { return joined_ids().size(); }
  std::set<int> dead_ids() const;
  const std::set<int>& wiped_ids() const { return wiped_; }
  // A device seen stopping that is in the run or leaving: the run must recover before its
  // next step.
  bool member_died() const;

 private:
  enum class where { out, joined, leaving };
  struct record {
    where at = where::out;
    bool failing = false, dead = false;
  };
  bool is(int id, where w) const {
    const auto it = devices_.find(id);
    return it != devices_.end() && it->second.at == w;
  }
  bool flag(int id, bool record::*f) const {
    const auto it = devices_.find(id);
    return it != devices_.end() && it->second.*f;
  }
  std::vector<int> ids(where w) const;
  std::map<int, record> devices_;
  std::set<int> wiped_;
};

}  // namespace dynapar::control
