// The in-process transport: matching, ordering, size checks, deadlines, abort
// and cancellation.
#include <gtest/gtest.h>

#include <thread>

#include "impl/inproc_links.h"

using namespace collcheck;
using namespace std::chrono_literals;

namespace {
std::span<std::byte> bytes(std::vector<int>& v) { return std::as_writable_bytes(std::span(v)); }
Deadline in(std::chrono::milliseconds d) { return Clock::now() + d; }
}  // namespace

TEST(InProcLinks, SendThenRecvAndRecvThenSend) {
  InProcFabric f(2);
  auto l0 = f.links(0), l1 = f.links(1);
  std::vector<int> a{1, 2, 3}, b(3), c{7, 8, 9}, d(3);
  auto s = l0->isend(1, 5, bytes(a));
  EXPECT_FALSE(s->test());  // rendezvous: nothing moves until the recv is posted
  auto r = l1->irecv(0, 5, bytes(b));
  r->wait(in(1s));
  s->wait(in(1s));
  EXPECT_EQ(b, a);
  auto r2 = l0->irecv(1, 6, bytes(d));
  auto s2 = l1->isend(0, 6, bytes(c));
  r2->wait(in(1s));
  EXPECT_TRUE(s2->test());
  EXPECT_EQ(d, c);
  EXPECT_EQ(f.pending(), 0u);
}

TEST(InProcLinks, MessagesWithTheSameTagArriveInOrderAndTagsDoNotMix) {
  InProcFabric f(2);
  auto l0 = f.links(0), l1 = f.links(1);
  std::vector<int> m1{1}, m2{2}, m3{3}, r1(1), r2(1), r3(1);
  auto s1 = l0->isend(1, 1, bytes(m1));
  auto s2 = l0->isend(1, 1, bytes(m2));
  auto s3 = l0->isend(1, 2, bytes(m3));
  auto q3 = l1->irecv(0, 2, bytes(r3));
  auto q1 = l1->irecv(0, 1, bytes(r1));
  auto q2 = l1->irecv(0, 1, bytes(r2));
  for (auto* q : {&q1, &q2, &q3}) (*q)->wait(in(1s));
  EXPECT_EQ(r1[0], 1);
  EXPECT_EQ(r2[0], 2);
  EXPECT_EQ(r3[0], 3);
}

TEST(InProcLinks, SizeMismatchFailsBothSidesWithTheSizes) {
  InProcFabric f(2);
  auto l0 = f.links(0), l1 = f.links(1);
  std::vector<int> a(4), b(5);
  auto s = l0->isend(1, 3, bytes(a));
  auto r = l1->irecv(0, 3, bytes(b));
  try {
    r->wait(in(1s));
    FAIL() << "expected a size mismatch";
  } catch (const LinkError& e) {
    EXPECT_NE(std::string(e.what()).find("sent 16 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 20 bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s->wait(in(1s)), LinkError);
}

TEST(InProcLinks, RecvWhosePeerNeverSendsFailsByItsDeadline) {
  InProcFabric f(3);
  auto l2 = f.links(2);
  std::vector<int> b(8);
  auto r = l2->irecv(1, (7u << 8) | 1, bytes(b));
  const auto start = Clock::now();
  try {
    r->wait(start + 150ms);
    FAIL() << "expected a timeout";
  } catch (const LinkTimeout& e) {
    const auto took = Clock::now() - start;
    EXPECT_GE(took, 150ms);
    EXPECT_LT(took, 150ms + 500ms) << "the timeout must fire promptly at its deadline";
    EXPECT_EQ(e.rank(), 2);
    EXPECT_EQ(e.peer(), 1);
    EXPECT_EQ(e.tag(), (7u << 8) | 1);
    const std::string w = e.what();
    EXPECT_NE(w.find("rank 2"), std::string::npos) << w;
    EXPECT_NE(w.find("recv from rank 1"), std::string::npos) << w;
    EXPECT_NE(w.find("call #7"), std::string::npos) << w;
  }
  // The timed-out recv was cancelled: a late send does not match it.
  EXPECT_EQ(f.pending(), 0u);
  auto l1 = f.links(1);
  std::vector<int> late(8, 42);
  auto s = l1->isend(2, (7u << 8) | 1, bytes(late));
  EXPECT_FALSE(s->test());
  EXPECT_EQ(b, std::vector<int>(8, 0));
}

TEST(InProcLinks, AbortWakesEveryWaiterAtOnce) {
  InProcFabric f(2);
  auto l0 = f.links(0);
  std::vector<int> b(1);
  auto r = l0->irecv(1, 9, bytes(b));
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    f.abort("rank 1 failed: boom");
  });
  const auto start = Clock::now();
  try {
    r->wait(start + 10s);
    FAIL() << "expected an abort";
  } catch (const LinkAborted& e) {
    EXPECT_LT(Clock::now() - start, 5s);
    EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
  }
  t.join();
  f.reset();
  std::vector<int> a{5}, c(1);
  auto s = f.links(1)->isend(0, 10, bytes(a));
  f.links(0)->irecv(1, 10, bytes(c))->wait(in(1s));
  EXPECT_EQ(c[0], 5);
}

// An abort scoped to call 2 fails the transfers of call 2 and later calls at
// once, and leaves those of call 1 to match as usual.
TEST(InProcLinks, AnAbortFromACallLeavesEarlierCallsAlone) {
  InProcFabric f(2);
  auto l0 = f.links(0);
  auto l1 = f.links(1);
  std::vector<int> early(1), later(1), sent{7};
  auto r1 = l0->irecv(1, call_tag(1) | 3, bytes(early));
  auto r2 = l0->irecv(1, call_tag(2), bytes(later));
  f.abort("rank 1 failed in call 2", 2);
  EXPECT_TRUE(f.aborted());
  const auto start = Clock::now();
  EXPECT_THROW(r2->wait(start + 10s), LinkAborted);
  EXPECT_THROW(l0->irecv(1, call_tag(3), bytes(later))->wait(start + 10s), LinkAborted);  // posted after the abort
  EXPECT_LT(Clock::now() - start, 5s);
  auto s1 = l1->isend(0, call_tag(1) | 3, bytes(sent));
  r1->wait(in(1s));  // call 1 is not aborted
  s1->wait(in(1s));
  EXPECT_EQ(early[0], 7);
  // A later, wider abort fails call 1 too.
  auto r0 = l0->irecv(1, call_tag(1), bytes(early));
  f.abort("the run limit expired");
  EXPECT_THROW(r0->wait(in(10s)), LinkAborted);
  f.reset();
}

TEST(InProcLinks, DestroyingAPendingRequestCancelsIt) {
  InProcFabric f(2);
  {
    std::vector<int> b(2);
    auto r = f.links(0)->irecv(1, 1, bytes(b));
    EXPECT_EQ(f.pending(), 1u);
  }
  EXPECT_EQ(f.pending(), 0u);
}

TEST(InProcLinks, RejectsInvalidPeers) {
  InProcFabric f(2);
  std::vector<int> b(1);
  EXPECT_THROW(f.links(0)->isend(0, 1, bytes(b)), LinkError);
  EXPECT_THROW(f.links(0)->irecv(2, 1, bytes(b)), LinkError);
  EXPECT_THROW(f.links(5), std::out_of_range);
  EXPECT_THROW(InProcFabric(0), std::invalid_argument);
}

// A peer that posted the matching transfer and cancelled it is named as such,
// not as a peer that never posted it.
TEST(InProcLinks, ATimeoutNamesAPeerThatPostedAndCancelled) {
  InProcFabric f(2);
  auto l0 = f.links(0), l1 = f.links(1);
  std::vector<int> out(4, 1), in(4);
  { auto dropped = l1->isend(0, (3u << 8) | 0, bytes(out)); }  // posted, then dropped unmatched
  auto r = l0->irecv(1, (3u << 8) | 1, bytes(in));  // another tag: no match, and nothing cancelled there
  try {
    r->wait(Clock::now() + 50ms);
    FAIL() << "expected a timeout";
  } catch (const LinkTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("the peer never posted"), std::string::npos) << e.what();
  }
  auto r2 = l0->irecv(1, (3u << 8) | 0, bytes(in));
  try {
    r2->wait(Clock::now() + 50ms);
    FAIL() << "expected a timeout";
  } catch (const LinkTimeout& e) {
    const std::string w = e.what();
    EXPECT_EQ(w.find("never posted"), std::string::npos) << w;
    EXPECT_NE(w.find("rank 1 posted the matching send and then cancelled it"), std::string::npos) << w;
  }
}

// Sizes as NCCL runs them: no error at the transfer. A longer send is cut to
// the receive (both complete); a shorter one leaves the receive waiting for
// the rest until its deadline, which says so. Checked sizes (the default)
// fail both at once.
TEST(InProcLinks, SizesAsNcclCutALongerSendAndLeaveAShorterOneWaiting) {
  const std::vector<std::byte> src(100, std::byte{7});
  for (const bool nccl : {true, false}) {
    InProcFabric f(2);
    f.set_sizes_as_nccl(nccl);
    auto a = f.links(0), b = f.links(1);
    std::vector<std::byte> dst(60, std::byte{0});
    auto s = a->isend(1, 5, std::span<const std::byte>(src.data(), 100));
    auto r = b->irecv(0, 5, std::span<std::byte>(dst.data(), 60));
    if (nccl) {
      EXPECT_NO_THROW(r->wait(Clock::now() + 1s));
      EXPECT_NO_THROW(s->wait(Clock::now() + 1s));
      EXPECT_EQ(dst, std::vector<std::byte>(60, std::byte{7}));
    } else {
      EXPECT_THROW(r->wait(Clock::now() + 1s), LinkError);
    }
    std::vector<std::byte> big(160, std::byte{0});
    auto s2 = a->isend(1, 6, std::span<const std::byte>(src.data(), 100));
    auto r2 = b->irecv(0, 6, std::span<std::byte>(big.data(), 160));
    if (nccl) {
      EXPECT_NO_THROW(s2->wait(Clock::now() + 1s));  // the sender is done
      try {
        r2->wait(Clock::now() + 100ms);
        ADD_FAILURE() << "a receive of 160 bytes completed on a send of 100";
      } catch (const LinkTimeout& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0's matching send carried 100 bytes and the rest never came"),
                  std::string::npos)
            << e.what();
      }
      EXPECT_EQ(big[99], std::byte{7});
      EXPECT_EQ(big[100], std::byte{0});
    } else {
      try {
        r2->wait(Clock::now() + 1s);
        ADD_FAILURE() << "a size mismatch completed with checked sizes";
      } catch (const LinkError& e) {
        EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos) << e.what();
      }
    }
  }
}
