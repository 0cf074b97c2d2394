#include "strategies/cluster/membership.h"

#include <algorithm>

#include "core/base/strings.h"

namespace cadre {

std::string view_key(int64_t generation) { return str_cat("elastic/view/", generation); }

std::string names(const std::set<std::string>& tasks) {
  return tasks.empty() ? std::string("none") : join(tasks);
}

std::set<std::string> not_in(const std::vector<std::string>& tasks,
                             const std::set<std::string>& have) {
  std::set<std::string> out;
  for (const std::string& t : tasks) {
    if (!have.count(t)) out.insert(t);
  }
  return out;
}

std::vector<std::string> parse_view(const std::string& value) {
  std::vector<std::string> members;
  size_t begin = 0;
  while (begin <= value.size() && !value.empty()) {
    size_t end = value.find(',', begin);
    if (end == std::string::npos) end = value.size();
    members.push_back(value.substr(begin, end - begin));
    begin = end + 1;
  }
  return members;
}

Membership::Membership(const std::vector<TaskId>& tasks) {
  for (const TaskId& t : tasks) order_.push_back(t.to_string());
}

bool Membership::contains(const std::string& task) const {
  return std::find(members_.begin(), members_.end(), task) != members_.end();
}

std::pair<std::string, std::string> Membership::change(const std::set<std::string>& alive) {
  members_.clear();
  for (const std::string& task : order_) {
    if (alive.count(task)) members_.push_back(task);
  }
  ++generation_;
  broken_ = false;
  return {view_key(generation_), join(members_, ",")};
}

}  // namespace cadre
