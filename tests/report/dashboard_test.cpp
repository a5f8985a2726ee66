// The dashboard serves only requests for this machine by address (dashboard/dashboard.hpp).
#include <catch2/catch.hpp>

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
