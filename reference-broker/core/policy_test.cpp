// Policies (policy.h): parsing RabbitMQ's shape, which policy applies, how its keys meet a client's arguments, and
// that a policy applies to the queues and exchanges that exist and to those declared later.
#include "reference-broker/core/policy.h"

#include <gtest/gtest.h>

#include "reference-broker/core/vhost.h"

namespace firemq {
namespace {

using Json = nlohmann::json;

Policy policy(const std::string& name, Json body) {
  Result<Policy, std::string> p = parse_policy("/", name, body);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
  return std::move(*p);
}

std::string refusal(Json body) {
  Result<Policy, std::string> p = parse_policy("/", "p", body);
  return p.ok() ? "accepted" : p.error();
}

TEST(PolicyParse, TakesRabbitMqsShapeWithItsDefaults) {
  Policy p = policy("limit", {{"pattern", "^q"}, {"definition", {{"max-length", 3}, {"overflow", "reject-publish"}}}});
  EXPECT_EQ(p.apply_to, PolicyTarget::all);
  EXPECT_EQ(p.priority, 0);
  EXPECT_EQ(p.parsed.max_length, 3u);
  EXPECT_EQ(p.parsed.overflow, Overflow::reject_publish);
  EXPECT_EQ(to_json(p), (Json{{"vhost", "/"},
                              {"name", "limit"},
                              {"pattern", "^q"},
                              {"apply-to", "all"},
                              {"priority", 0},
                              {"definition", {{"max-length", 3}, {"overflow", "reject-publish"}}}}));
}

TEST(PolicyParse, RefusesWhatItCannotHonourNamingTheField) {
  EXPECT_EQ(refusal({{"definition", {{"max-length", 1}}}}), "'pattern' must be a string (a regular expression)");
  EXPECT_NE(refusal({{"pattern", "("}, {"definition", {{"max-length", 1}}}}).find("not a regular expression"),
            std::string::npos);
  EXPECT_EQ(refusal({{"pattern", "."}}), "'definition' is required");
  EXPECT_EQ(refusal({{"pattern", "."}, {"definition", Json::object()}}), "'definition' must be a non-empty object");
  EXPECT_NE(refusal({{"pattern", "."}, {"definition", {{"ha-mode", "all"}}}})
                .find("definition key 'ha-mode' is not supported by this broker"),
            std::string::npos);
  EXPECT_EQ(refusal({{"pattern", "."}, {"definition", {{"max-length", -1}}}}),
            "definition key 'max-length' must be an integer from 0 to 9223372036854775807, not -1");
  EXPECT_EQ(refusal({{"pattern", "."}, {"definition", {{"expires", 0}}}}),
            "definition key 'expires' must be an integer from 1 to 315360000000, not 0");
  EXPECT_EQ(refusal({{"pattern", "."}, {"definition", {{"overflow", "drop-tail"}}}}),
            "definition key 'overflow' must be drop-head, reject-publish or reject-publish-dlx, not 'drop-tail'");
  EXPECT_EQ(refusal({{"pattern", "."}, {"definition", {{"dead-letter-exchange", 5}}}}),
            "definition key 'dead-letter-exchange' must be a string, not 5");
  EXPECT_EQ(refusal({{"pattern", "."}, {"apply-to", "streams"}, {"definition", {{"max-length", 1}}}}),
            "'apply-to' must be queues, exchanges or all, not \"streams\"");
  EXPECT_EQ(refusal({{"pattern", "."}, {"priority", "high"}, {"definition", {{"max-length", 1}}}}),
            "'priority' must be an integer, not \"high\"");
  EXPECT_NE(refusal({{"pattern", std::string(kMaxPolicyPattern + 1, 'a')}, {"definition", {{"max-length", 1}}}})
                .find("over the limit"),
            std::string::npos);
}

TEST(PolicyMatch, TheHighestPriorityThatMatchesWinsAndTiesGoToTheFirstName) {
  std::map<std::string, Policy> set;
  set.emplace("b-low", policy("b-low", {{"pattern", "^orders"}, {"priority", 1}, {"definition", {{"max-length", 1}}}}));
  set.emplace("a-high", policy("a-high", {{"pattern", "ord"}, {"priority", 5}, {"definition", {{"max-length", 2}}}}));
  set.emplace("c-high", policy("c-high", {{"pattern", "s$"}, {"priority", 5}, {"definition", {{"max-length", 3}}}}));
  set.emplace("x-only", policy("x-only", {{"pattern", "."},
                                          {"priority", 9},
                                          {"apply-to", "exchanges"},
                                          {"definition", {{"alternate-exchange", "ae"}}}}));
  EXPECT_EQ(policy_for(set, PolicyTarget::queues, "orders")->name, "a-high");  // a search, not a full match
  EXPECT_EQ(policy_for(set, PolicyTarget::queues, "items")->name, "c-high");
  EXPECT_EQ(policy_for(set, PolicyTarget::exchanges, "orders")->name, "x-only");
  EXPECT_EQ(policy_for(set, PolicyTarget::queues, "q"), nullptr);
}

TEST(PolicyArguments, TheLowerLimitWinsAndTheClientsArgumentWinsTheRest) {
  const Map args{{Value("x-max-length"), Value(10)},
                 {Value("x-message-ttl"), Value(100)},
                 {Value("x-overflow"), Value("drop-head")},
                 {Value("x-dead-letter-exchange"), Value("mine")}};
  const QueueArguments declared = *parse_queue_arguments(args, "q", "/");
  Policy p = policy("p", {{"pattern", "."},
                          {"definition",
                           {{"max-length", 20},
                            {"message-ttl", 50},
                            {"expires", 1000},
                            {"overflow", "reject-publish"},
                            {"dead-letter-exchange", "theirs"},
                            {"dead-letter-routing-key", "k"}}}});
  const QueueArguments a = effective_arguments(declared, args, &p);
  EXPECT_EQ(a.max_length, 10u);
  EXPECT_EQ(a.message_ttl_ms, 50u);
  EXPECT_EQ(a.expires_ms, 1000u);
  EXPECT_EQ(a.overflow, Overflow::drop_head);
  EXPECT_EQ(a.dead_letter_exchange, "mine");
  EXPECT_EQ(a.dead_letter_routing_key, "k");
  EXPECT_EQ(effective_arguments(declared, args, nullptr).message_ttl_ms, 100u);
}

MessagePtr message(const std::string& body) {
  return BrokerMessage::make(MessageParts{"", "q", Props{}, {}, false}, as_bytes(body));
}

class VhostPolicies : public ::testing::Test {
 protected:
  Queue& declare(const std::string& name, Map args = {}) {
    op::DeclareQueue d;
    d.name = name;
    d.args = std::move(args);
    EXPECT_TRUE(vhost_.declare_queue(d, "conn").ok());
    return *vhost_.usable_queue(name, "conn").value();
  }
  void exchange(const std::string& name, Map args = {}) {
    op::DeclareExchange d;
    d.name = name;
    d.type = "fanout";
    d.args = std::move(args);
    ASSERT_FALSE(vhost_.declare_exchange(d));
  }
  void bind(const std::string& exchange, const std::string& queue) {
    op::BindFields b;
    b.exchange = exchange;
    b.queue = queue;
    ASSERT_FALSE(vhost_.bind(b, "conn"));
  }

  ManualTime time_;
  Vhost vhost_{"/", time_};
};

TEST_F(VhostPolicies, APolicyAppliesAtOnceToExistingQueuesAndLaterToNewOnes) {
  Queue& old = declare("jobs-old");
  for (const char* body : {"1", "2", "3", "4"}) old.enqueue(message(body));
  vhost_.set_policy(policy("cap", {{"pattern", "^jobs"}, {"apply-to", "queues"}, {"definition", {{"max-length", 2}}}}));
  EXPECT_EQ(old.ready_count(), 2u);  // drop-head: the two oldest went
  EXPECT_EQ(old.policy_name(), "cap");
  Queue& later = declare("jobs-new");
  for (const char* body : {"1", "2", "3"}) later.enqueue(message(body));
  EXPECT_EQ(later.ready_count(), 2u);
  Queue& other = declare("mail");
  EXPECT_EQ(other.policy_name(), "");
  ASSERT_TRUE(vhost_.delete_policy("cap"));
  EXPECT_FALSE(vhost_.delete_policy("cap"));
  later.enqueue(message("4"));
  EXPECT_EQ(later.ready_count(), 3u);  // the declared arguments again: no limit
  EXPECT_EQ(later.policy_name(), "");
}

TEST_F(VhostPolicies, APolicysAlternateExchangeTakesUnroutablesUnlessTheArgumentNamesOne) {
  exchange("ae");
  Queue& caught = declare("caught");
  bind("ae", "caught");
  exchange("from-policy");
  exchange("own-ae", Map{{Value("alternate-exchange"), Value("nowhere")}});
  vhost_.set_policy(
      policy("unroutable",
             {{"pattern", "^(from|own)"}, {"apply-to", "exchanges"}, {"definition", {{"alternate-exchange", "ae"}}}}));
  EXPECT_EQ(vhost_.exchanges().at("from-policy").policy, "unroutable");
  EXPECT_EQ(vhost_.route("from-policy", "k", {})->queues, std::vector<Queue*>{&caught});
  EXPECT_TRUE(vhost_.route("own-ae", "k", {})->queues.empty());  // the argument's AE wins, and is missing
}

Policy operator_policy(const std::string& name, Json body) {
  Result<Policy, std::string> p = parse_policy("/", name, body, PolicyKind::operator_policy);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error());
  return std::move(*p);
}

std::string operator_refusal(Json body) {
  Result<Policy, std::string> p = parse_policy("/", "op", body, PolicyKind::operator_policy);
  return p.ok() ? "accepted" : p.error();
}

TEST(OperatorPolicyParse, TakesTheOperatorKeysForQueuesOnly) {
  Policy p = operator_policy("cap", {{"pattern", "."},
                                     {"definition",
                                      {{"max-length", 5},
                                       {"overflow", "reject-publish"},
                                       {"expires", 1000},
                                       {"message-ttl", 10},
                                       {"max-length-bytes", 99}}}});
  EXPECT_EQ(p.kind, PolicyKind::operator_policy);
  EXPECT_EQ(p.parsed.max_length, 5u);
  EXPECT_EQ(operator_refusal({{"pattern", "."}, {"apply-to", "exchanges"}, {"definition", {{"max-length", 1}}}}),
            "'apply-to': operator policies apply to queues only");
  EXPECT_EQ(operator_refusal({{"pattern", "."}, {"definition", {{"dead-letter-exchange", "x"}}}}),
            "definition key 'dead-letter-exchange' is not allowed in an operator policy (allowed: expires, "
            "message-ttl, max-length, max-length-bytes, overflow)");
  for (const char* key : {"delivery-limit", "max-in-memory-length", "max-in-memory-bytes"}) {
    EXPECT_NE(operator_refusal({{"pattern", "."}, {"definition", {{key, 1}}}}).find("is not supported by this broker"),
              std::string::npos)
        << key;
  }
  EXPECT_NE(operator_refusal({{"pattern", "."}, {"definition", {{"max-length", -1}}}}).find("max-length"),
            std::string::npos);
}

TEST(OperatorPolicyArguments, TheLowestOfArgumentPolicyAndOperatorPolicyWinsAndTheOperatorsOverflow) {
  const Map args{{Value("x-max-length"), Value(10)}, {Value("x-message-ttl"), Value(100)}};
  const QueueArguments declared = *parse_queue_arguments(args, "q", "/");
  Policy user = policy("p", {{"pattern", "."},
                             {"definition", {{"max-length", 8}, {"expires", 500}, {"overflow", "reject-publish"}}}});
  Policy op = operator_policy("op", {{"pattern", "."},
                                     {"definition",
                                      {{"max-length", 20},
                                       {"message-ttl", 30},
                                       {"expires", 9000},
                                       {"max-length-bytes", 64},
                                       {"overflow", "drop-head"}}}});
  const QueueArguments a = effective_arguments(declared, args, &user, &op);
  EXPECT_EQ(a.max_length, 8u);       // the policy's, lowest of 10, 8 and 20
  EXPECT_EQ(a.message_ttl_ms, 30u);  // the operator policy's, below the argument's 100
  EXPECT_EQ(a.expires_ms, 500u);
  EXPECT_EQ(a.max_length_bytes, 64u);
  EXPECT_EQ(a.overflow, Overflow::drop_head);  // the operator's over the policy's
  EXPECT_EQ(effective_arguments(declared, args, nullptr, &op).max_length, 10u);
  EXPECT_EQ(effective_definition(&user, &op), (Json{{"max-length", 8},
                                                    {"expires", 500},
                                                    {"overflow", "drop-head"},
                                                    {"message-ttl", 30},
                                                    {"max-length-bytes", 64}}));
  EXPECT_EQ(effective_definition(nullptr, nullptr), Json::object());
}

TEST_F(VhostPolicies, AnOperatorPolicyCapsExistingAndNewQueuesBesideThePolicy) {
  Queue& old = declare("jobs-old");
  for (const char* body : {"1", "2", "3", "4"}) old.enqueue(message(body));
  vhost_.set_policy(policy("loose", {{"pattern", "^jobs"}, {"priority", 5}, {"definition", {{"max-length", 3}}}}));
  vhost_.set_policy(operator_policy("cap", {{"pattern", "^jobs"}, {"definition", {{"max-length", 2}}}}));
  EXPECT_EQ(old.ready_count(), 2u);
  EXPECT_EQ(old.policy_name(), "loose");
  EXPECT_EQ(old.operator_policy_name(), "cap");
  EXPECT_EQ(vhost_.policies(PolicyKind::operator_policy).size(), 1u);
  EXPECT_EQ(vhost_.policies().size(), 1u);
  Queue& later = declare("jobs-new");
  for (const char* body : {"1", "2", "3"}) later.enqueue(message(body));
  EXPECT_EQ(later.ready_count(), 2u);
  EXPECT_FALSE(vhost_.delete_policy("cap"));  // not a policy: an operator policy
  ASSERT_TRUE(vhost_.delete_policy("cap", PolicyKind::operator_policy));
  later.enqueue(message("4"));
  EXPECT_EQ(later.ready_count(), 3u);  // the policy's 3 again
  EXPECT_EQ(later.operator_policy_name(), "");
}

}  // namespace
}  // namespace firemq
