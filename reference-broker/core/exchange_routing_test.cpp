#include "reference-broker/core/exchange_routing.h"

#include <gtest/gtest.h>

namespace firemq {
namespace {

TEST(TopicMatching, StarMatchesExactlyOneWord) {
  EXPECT_TRUE(topic_matches("a.*.c", "a.b.c"));
  EXPECT_FALSE(topic_matches("a.*.c", "a.c"));
  EXPECT_FALSE(topic_matches("a.*.c", "a.b.b.c"));
  EXPECT_TRUE(topic_matches("*", "word"));
  EXPECT_FALSE(topic_matches("*", "two.words"));
}

TEST(TopicMatching, HashMatchesZeroOrMoreWords) {
  EXPECT_TRUE(topic_matches("a.#", "a"));
  EXPECT_TRUE(topic_matches("a.#", "a.b"));
  EXPECT_TRUE(topic_matches("a.#", "a.b.c"));
  EXPECT_TRUE(topic_matches("#.c", "c"));
  EXPECT_TRUE(topic_matches("a.#.c", "a.c"));
  EXPECT_TRUE(topic_matches("a.#.c", "a.x.y.c"));
  EXPECT_FALSE(topic_matches("a.#.c", "a.x.y"));
  EXPECT_TRUE(topic_matches("#", "anything.at.all"));
}

TEST(TopicMatching, HashMatchesTheEmptyKey) {
  EXPECT_TRUE(topic_matches("#", ""));
  EXPECT_FALSE(topic_matches("*", ""));  // "" has zero words
  EXPECT_TRUE(topic_matches("", ""));
  EXPECT_FALSE(topic_matches("", "a"));
}

TEST(TopicMatching, EmptyWordsAreWords) {
  EXPECT_TRUE(topic_matches("a.*.b", "a..b"));  // the middle word is empty
  EXPECT_TRUE(topic_matches("*.*", "."));       // two empty words
  EXPECT_FALSE(topic_matches("a.b", "a..b"));
  EXPECT_TRUE(topic_matches("a..b", "a..b"));
}

TEST(TopicMatching, WordsCompareWhole) {
  EXPECT_FALSE(topic_matches("a.b", "a.bc"));
  EXPECT_FALSE(topic_matches("a*", "ab"));  // "*" is a wildcard only as a whole word
  EXPECT_TRUE(topic_matches("a*", "a*"));
}

Map m(std::initializer_list<MapEntry> entries) { return Map(entries); }

TEST(HeadersMatching, AllIsTheDefaultAndNeedsEveryKey) {
  const Map binding = m({{Value("a"), Value(1)}, {Value("b"), Value("x")}});
  EXPECT_TRUE(headers_match(binding, m({{Value("a"), Value(1)}, {Value("b"), Value("x")}, {Value("c"), Value(3)}})));
  EXPECT_FALSE(headers_match(binding, m({{Value("a"), Value(1)}})));
}

TEST(HeadersMatching, AnyNeedsOneKey) {
  const Map binding = m({{Value("x-match"), Value("any")}, {Value("a"), Value(1)}, {Value("b"), Value(2)}});
  EXPECT_TRUE(headers_match(binding, m({{Value("b"), Value(2)}})));
  EXPECT_FALSE(headers_match(binding, m({{Value("b"), Value(3)}})));
}

TEST(HeadersMatching, ValuesCompareByValueNotByEncoding) {
  const Map binding = m({{Value("n"), Value(std::uint64_t{5})}});
  EXPECT_TRUE(headers_match(binding, m({{Value("n"), Value(std::int64_t{5})}})));
  EXPECT_FALSE(headers_match(binding, m({{Value("n"), Value("5")}})));
}

TEST(HeadersMatching, NilOnlyChecksPresence) {
  const Map binding = m({{Value("k"), Value(Nil{})}});
  EXPECT_TRUE(headers_match(binding, m({{Value("k"), Value("anything")}})));
  EXPECT_FALSE(headers_match(binding, m({})));
}

TEST(HeadersMatching, XKeysAreIgnoredUnlessWithX) {
  const Map all = m({{Value("x-tenant"), Value("t1")}});
  EXPECT_TRUE(headers_match(all, m({})));  // all of nothing checked matches everything
  const Map with_x = m({{Value("x-match"), Value("all-with-x")}, {Value("x-tenant"), Value("t1")}});
  EXPECT_FALSE(headers_match(with_x, m({})));
  EXPECT_TRUE(headers_match(with_x, m({{Value("x-tenant"), Value("t1")}})));
  const Map any_with_x = m({{Value("x-match"), Value("any-with-x")}, {Value("x-a"), Value(1)}});
  EXPECT_TRUE(headers_match(any_with_x, m({{Value("x-a"), Value(1)}})));
}

TEST(HeadersMatching, AnyWithNothingToCheckMatchesNothing) {
  EXPECT_FALSE(headers_match(m({{Value("x-match"), Value("any")}}), m({{Value("a"), Value(1)}})));
}

TEST(HeadersMatching, UnknownXMatchIsRefused) {
  auto bad = check_headers_binding(m({{Value("x-match"), Value("some")}}));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->code, 406);
  EXPECT_FALSE(check_headers_binding(m({{Value("x-match"), Value("any-with-x")}})));
}

TEST(SenderSelected, CcAndBccKeysInOrderAndAnythingButAnArrayIs406) {
  const Map headers{{Value("CC"), Value(Array{Value("a"), Value(std::uint64_t{1}), Value("b")})},
                    {Value("BCC"), Value(Array{Value("c")})}};
  EXPECT_EQ(*sender_selected_keys(headers), (std::vector<std::string>{"a", "b", "c"}));  // non-strings skipped
  EXPECT_TRUE(sender_selected_keys({})->empty());
  auto bad = sender_selected_keys(Map{{Value("CC"), Value("a")}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, 406);
  Map delivered = headers;
  remove_blind_copies(delivered);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].key, Value("CC"));
}

}  // namespace
}  // namespace firemq
