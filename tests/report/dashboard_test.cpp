// The dashboard serves only requests for this machine by address (dashboard/dashboard.hpp).
#include <catch2/catch.hpp>

#include <httplib.h>

#include "dashboard/dashboard.hpp"

using dynapar::dashboard::host_allowed;

TEST_CASE("the dashboard serves addresses and localhost, never a DNS name (rebinding)", "[unit][dashboard]") {
  for (const char* yes : {"127.0.0.1:8265", "127.0.0.1", "localhost:8265", "[::1]:8265", "10.1.2.3:80", "[fe80::1]:8265", "::1"}) {
    INFO(yes);
    CHECK(host_allowed(yes));
  }
  for (const char* no : {"rebind.example:8265", "127.0.0.1.rebind.example", "localhost.rebind.example:8265", "", "[::1:8265",
                         "127.evil.example:8265"}) {
    INFO(no);
    CHECK_FALSE(host_allowed(no));
  }
}

TEST_CASE("a dashboard token: bearer or query, exact, nothing needed without one", "[unit][dashboard]") {
  using dynapar::dashboard::token_allowed;
  CHECK(token_allowed("", "", ""));
  CHECK(token_allowed("s3cret", "Bearer s3cret", ""));
  CHECK(token_allowed("s3cret", "", "s3cret"));
  CHECK_FALSE(token_allowed("s3cret", "", ""));
  CHECK_FALSE(token_allowed("s3cret", "Bearer s3cre", ""));
  CHECK_FALSE(token_allowed("s3cret", "Bearer s3cret!", ""));
  CHECK_FALSE(token_allowed("s3cret", "", "S3cret"));
  CHECK_FALSE(token_allowed("s3cret", "Basic s3cret", ""));
  CHECK_FALSE(token_allowed("s3cret", "Bearer wrong", "s3cret"));  // a wrong header is not rescued by the query
}

TEST_CASE("a dashboard with a token answers 401 without it and serves with it", "[dashboard]") {
  auto srv = dynapar::dashboard::server::start({"127.0.0.1", 0, "s3cret"});
  REQUIRE(srv);
  (*srv)->publish({{"step", 7}});
  httplib::Client c("127.0.0.1", (*srv)->port());
  auto none = c.Get("/api/state");
  REQUIRE(none);
  CHECK(none->status == 401);
  auto query = c.Get("/api/state?token=s3cret");
  REQUIRE(query);
  CHECK(query->status == 200);
  CHECK(query->body.find("\"step\":7") != std::string::npos);
  auto bearer = c.Get("/metrics", httplib::Headers{{"Authorization", "Bearer s3cret"}});
  REQUIRE(bearer);
  CHECK(bearer->status == 200);
  auto wrong = c.Get("/", httplib::Headers{{"Authorization", "Bearer nope"}});
  REQUIRE(wrong);
  CHECK(wrong->status == 401);
}
