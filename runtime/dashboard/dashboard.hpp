// The live dashboard of a training run (train, controller, launch with --dashboard): a small
// web page, a JSON API and a Prometheus text endpoint, served on a thread of its own
// (cpp-httplib). The caller publishes the run's state as JSON whenever it changes; requests
// serialise the latest copy on the server's thread, so a slow client never holds up training.
//   GET /            the page (polls /api/state)
//   GET /api/state   the state: {job, step, steps, plan, devices, events, ...} (docs/RUNTIME.md)
//   GET /metrics     Prometheus text (prometheus_text below)
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace dynapar::dashboard {

struct dashboard_config {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8265;                 // 0: any free port (port() tells which)
  // Non-empty: every request must carry it (token_allowed); required beyond loopback.
  std::string token;
};

class server {
 public:
  // Binds and starts serving; an error names the address that could not be bound.
  static result<std::unique_ptr<server>> start(const dashboard_config& c);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  int port() const { return port_; }
  void publish(nlohmann::json state);

 private:
  struct impl;
  explicit server(std::unique_ptr<impl> p, int port);
  std::unique_ptr<impl> p_;
  int port_;
};

// The state's numbers as Prometheus text exposition (format 0.0.4). Pure.
// Whether a request's Host header names this machine by address or as localhost (never a DNS
// name another site could point here: DNS rebinding).
bool host_allowed(const std::string& host_header);
// Whether a request carries the dashboard's token: `Authorization: Bearer TOKEN` (Prometheus'
// `authorization` setting) or `?token=TOKEN` (a browser; the page passes it on). Compared in
// constant time. An empty `token` lets every request through.
bool token_allowed(const std::string& token, const std::string& authorization_header, const std::string& query_token);
std::string prometheus_text(const nlohmann::json& state);

// The page served at / (self-contained: no files, no external scripts).
const std::string& page_html();

}  // namespace dynapar::dashboard
