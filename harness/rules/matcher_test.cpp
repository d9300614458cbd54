#include "harness/rules/matcher.h"

#include <gtest/gtest.h>

namespace firemq::conform {
namespace {

using Json = nlohmann::json;

Value header(std::initializer_list<MapEntry> entries) { return Value(Map(entries)); }

std::string match(const char* pattern, const Value& actual, Vars& vars) {
  return match_value(Json::parse(pattern), &actual, "", vars);
}

TEST(Matcher, ObjectPatternMatchesASubsetOfKeys) {
  Vars vars;
  const Value h = header({{Value("code"), Value(403)}, {Value("msg"), Value("no")}});
  EXPECT_EQ(match(R"({"code": 403})", h, vars), "");
  EXPECT_NE(match(R"({"code": 404})", h, vars), "");
}

TEST(Matcher, ZeroValuedPatternMatchesAnOmittedField) {
  Vars vars;
  const Value h = header({{Value("code"), Value(540)}});
  EXPECT_EQ(match(R"({"fatal": false, "rid": 0, "msg": ""})", h, vars), "");
  EXPECT_NE(match(R"({"fatal": true})", h, vars), "");
}

TEST(Matcher, OneOfAcceptsAnyAlternative) {
  Vars vars;
  const Value h = header({{Value("code"), Value(530)}});
  EXPECT_EQ(match(R"({"code": {"$one_of": [403, 530]}})", h, vars), "");
  EXPECT_NE(match(R"({"code": {"$one_of": [403, 404]}})", h, vars), "");
}

TEST(Matcher, SomeFindsAMatchingElementAnywhereAndKeepsItsCaptures) {
  Vars vars;
  const Value list(Array{header({{Value("name"), Value("a")}, {Value("n"), Value(1)}}),
                         header({{Value("name"), Value("b")}, {Value("n"), Value(2)}})});
  EXPECT_EQ(match(R"({"$some": {"name": "b", "n": {"$capture": "n_of_b"}}})", list, vars), "");
  EXPECT_EQ(vars.at("n_of_b"), Value(2));
  EXPECT_NE(match(R"({"$some": {"name": "c"}})", list, vars), "");
  EXPECT_NE(match(R"({"$some": {"name": "a"}})", header({{Value("name"), Value("a")}}), vars), "");  // not an array
}

TEST(Matcher, ComparisonsTypesAndPresence) {
  Vars vars;
  const Value h = header({{Value("n"), Value(10)}, {Value("s"), Value("hello world")}});
  EXPECT_EQ(match(R"({"n": {"$ge": 10}, "s": {"$contains": "world"}})", h, vars), "");
  EXPECT_NE(match(R"({"n": {"$gt": 10}})", h, vars), "");
  EXPECT_EQ(match(R"({"n": {"$type": "uint"}, "s": {"$type": "str"}})", h, vars), "");
  EXPECT_EQ(match(R"({"x": {"$absent": true}, "n": {"$present": true}})", h, vars), "");
  EXPECT_NE(match(R"({"n": {"$absent": true}})", h, vars), "");
  EXPECT_EQ(match(R"({"x": {"$zero": true}, "n": {"$nonzero": true}})", h, vars), "");
}

TEST(Matcher, LiteralsAreTyped) {
  Vars vars;
  const Value h = header({{Value("f"), Value(1.0)}, {Value("b"), Value(Bin{{0xff}})}});
  EXPECT_EQ(match(R"({"f": {"$float64": 1.0}, "b": {"$bin": "ff"}})", h, vars), "");
  EXPECT_NE(match(R"({"f": 1})", h, vars), "");  // an int is not a float
}

TEST(Matcher, CaptureStoresTheValue) {
  Vars vars;
  const Value h = header({{Value("name"), Value("amq.gen-1")}});
  EXPECT_EQ(match(R"({"name": {"$capture": "q"}})", h, vars), "");
  EXPECT_EQ(vars.at("q"), Value("amq.gen-1"));
}

TEST(Matcher, MismatchNamesThePath) {
  Vars vars;
  const Value h = header({{Value("server"), Value(Map{{Value("name"), Value("other")}})}});
  const std::string why = match(R"({"server": {"name": "firemq"}})", h, vars);
  EXPECT_NE(why.find("'server.name'"), std::string::npos) << why;
}

}  // namespace
}  // namespace firemq::conform
