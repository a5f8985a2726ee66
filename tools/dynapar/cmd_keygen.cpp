// `dynapar keygen`: a CURVE key pair for a controller, a node or an operator (docs/SECURITY.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "comm/keys.hpp"
#include "commands.hpp"

namespace dynapar::cli {
namespace {

struct keygen_options {
  std::string out, role = "node";
  std::vector<std::string> names;  // one key pair each (none: one named after the role)
  bool authorize = false;          // also put each public key in OUT/authorized/
};

int keygen_main(const keygen_options& o) {
  auto role = comm::parse_role(o.role);
  if (!role) return report(role.err());
  if (o.authorize && *role == comm::key_role::controller)
    return report(make_error("bad_flag", "--authorize admits node and operator keys; the controller's own key is not admitted"));
  for (const auto& name : o.names.empty() ? std::vector<std::string>{o.role} : o.names) {
    auto k = comm::make_key_pair(name, *role);
    if (!k) return report(k.err());
    if (auto st = comm::write_key_pair(o.out, *k); !st) return report(st.err());
    if (o.authorize)
      if (auto st = comm::write_public_key(o.out + "/authorized", k->pub); !st) return report(st.err());
    const auto base = o.out + "/" + k->pub.name;
    std::cout << "wrote " << base << ".key (secret, mode 0600) and " << base << ".pub" << (o.authorize ? ", admitted in authorized/" : "")
              << "\n";
    if (*role == comm::key_role::controller)
      std::cout << "next: copy " << base << ".pub to each node and operator as DIR/controller.pub; put their .pub files in "
                << o.out << "/authorized/\n";
    else if (!o.authorize)
      std::cout << "next: copy " << base << ".pub into the controller's KEYS/authorized/, and its controller.pub next to "
                << base << ".key\n";
  }
  return exit_ok;
}

}  // namespace

void add_keygen(CLI::App& app, runner& run) {
  auto o = std::make_shared<keygen_options>();
  auto* k = app.add_subcommand("keygen", "Make a CURVE key pair for a controller, node or operator (docs/SECURITY.md)");
  k->add_option("--out", o->out, "Directory for NAME.key and NAME.pub (made if missing)")->required();
  k->add_option("--role", o->role, "controller, node or operator (default node)")
      ->check(CLI::IsMember({"controller", "node", "operator"}));
  k->add_option("--name", o->names, "The key's name (default: the role); repeat it for several key pairs");
  k->add_flag("--authorize", o->authorize, "Also put each public key in OUT/authorized/, where a controller using OUT admits it");
  k->callback([o, &run] { run = [o] { return keygen_main(*o); }; });
}

}  // namespace dynapar::cli
