#include "dashboard/dashboard.hpp"

#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>

#include <sstream>
#include <thread>

namespace dynapar::dashboard {

bool host_allowed(const std::string& host_header) {
  // The name the browser was asked for, without the port: "[::1]:8265", "127.0.0.1:8265".
  std::string name = host_header;
  if (!name.empty() && name.front() == '[') {
    const auto end = name.find(']');
    if (end == std::string::npos) return false;
    name = name.substr(1, end - 1);
  } else if (std::count(name.begin(), name.end(), ':') == 1) {
    name = name.substr(0, name.find(':'));
  }
  if (name == "localhost") return true;
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, name.c_str(), &v4) == 1 || inet_pton(AF_INET6, name.c_str(), &v6) == 1;
}

bool token_allowed(const std::string& token, const std::string& authorization_header, const std::string& query_token) {
  if (token.empty()) return true;
  const std::string bearer = "Bearer ";
  const std::string given =
      authorization_header.rfind(bearer, 0) == 0 ? authorization_header.substr(bearer.size()) : query_token;
  if (given.size() != token.size()) return false;
  unsigned char diff = 0;  // every byte compared: no early exit a timing could reveal
  for (std::size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ token[i]);
  return diff == 0;
}

struct server::impl {
  httplib::Server http;
  std::thread thread;
  std::mutex mu;
  nlohmann::json state = nlohmann::json::object();  // the latest published state
};

result<std::unique_ptr<server>> server::start(const dashboard_config& c) {
  auto p = std::make_unique<impl>();
  auto* raw = p.get();
  // DNS rebinding: a web page of another site that gets its name pointed at this machine
  // reaches the dashboard from the user's own browser, with its own name as Host. Only
  // addresses and localhost are served.
  p->http.set_pre_routing_handler([token = c.token](const httplib::Request& req, httplib::Response& res) {
    if (!host_allowed(req.get_header_value("Host"))) {
      res.status = 403;
      res.set_content("dynapar dashboard: this Host is not served (open it by address: http://127.0.0.1:PORT/)\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (token_allowed(token, req.get_header_value("Authorization"), req.get_param_value("token")))
      return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_content("dynapar dashboard: this run's dashboard needs its token (?token=TOKEN, or Authorization: Bearer TOKEN)\n",
                    "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  p->http.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(page_html(), "text/html; charset=utf-8"); });
  p->http.Get("/api/state", [raw](const httplib::Request&, httplib::Response& res) {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(raw->mu);
      text = raw->state.dump();
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(text, "application/json");
  });
  p->http.Get("/metrics", [raw](const httplib::Request&, httplib::Response& res) {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(raw->mu);
      text = prometheus_text(raw->state);
    }
    res.set_content(text, "text/plain; version=0.0.4");
  });
  int port = c.port;
  if (port == 0) {
    port = p->http.bind_to_any_port(c.host.c_str());
    if (port < 0) return make_error("bad_address", "dashboard: cannot bind " + c.host + " on any port");
  } else if (!p->http.bind_to_port(c.host.c_str(), port)) {
    return make_error("bad_address", "dashboard: cannot bind " + c.host + ":" + std::to_string(port) +
                                         " (in use? --dashboard 0 takes a free one)");
  }
  p->thread = std::thread([raw] { raw->http.listen_after_bind(); });
  return std::unique_ptr<server>(new server(std::move(p), port));
}

server::server(std::unique_ptr<impl> p, int port) : p_(std::move(p)), port_(port) {}

server::~server() {
  p_->http.stop();
  if (p_->thread.joinable()) p_->thread.join();
}

void server::publish(nlohmann::json state) {
  std::lock_guard<std::mutex> lock(p_->mu);
  p_->state = std::move(state);
}

namespace {
void metric(std::ostringstream& os, const char* name, const char* help, const char* type, const nlohmann::json& v,
            const std::string& labels = "") {
  if (!v.is_number()) return;
  os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  os << name << labels << " " << v.get<double>() << "\n";
}
nlohmann::json at(const nlohmann::json& s, const char* key) { return s.is_object() && s.contains(key) ? s[key] : nlohmann::json(); }
}  // namespace

std::string prometheus_text(const nlohmann::json& s) {
  std::ostringstream os;
  metric(os, "dynapar_step", "Steps done", "gauge", at(s, "step"));
  // A gauge, so not _total (Prometheus keeps that suffix for counters; promtool checks it).
  metric(os, "dynapar_job_steps", "Steps of the job", "gauge", at(s, "steps"));
  metric(os, "dynapar_step_time_seconds", "Last step's wall time", "gauge", at(s, "step_time_s"));
  metric(os, "dynapar_samples_per_second", "Recent training throughput", "gauge", at(s, "samples_per_s"));
  metric(os, "dynapar_loss", "Recent mean training loss", "gauge", at(s, "loss"));
  metric(os, "dynapar_cost_per_step", "Last step's cost (price x time)", "gauge", at(s, "cost"));
  metric(os, "dynapar_cost_queue", "The controller's cost queue backlog", "gauge", at(s, "cost_queue"));
  metric(os, "dynapar_budget_per_step", "The cost budget per step", "gauge", at(s, "budget"));
  metric(os, "dynapar_plan_changes_total", "Plan changes so far", "counter", at(s, "plan_changes"));
  metric(os, "dynapar_faults_injected_total", "Faults injected so far", "counter", at(s, "faults"));
  const auto devices = at(s, "devices");
  if (devices.is_array() && !devices.empty()) {
    os << "# HELP dynapar_device_compute_seconds A device's compute time in the last step\n"
          "# TYPE dynapar_device_compute_seconds gauge\n";
    for (const auto& d : devices)
      if (d.contains("compute_s") && d["compute_s"].is_number())
        os << "dynapar_device_compute_seconds{device=\"" << d.value("id", -1) << "\"} " << d["compute_s"].get<double>() << "\n";
    os << "# HELP dynapar_device_in_plan 1 if the plan in force uses the device\n# TYPE dynapar_device_in_plan gauge\n";
    for (const auto& d : devices)
      os << "dynapar_device_in_plan{device=\"" << d.value("id", -1) << "\"} " << (d.value("state", "") == "in plan" ? 1 : 0) << "\n";
  }
  return os.str();
}

}  // namespace dynapar::dashboard
