// kiln::Dims: a shape or strides, a list of int64 with std::vector's interface whose first
// six entries live inline, so copying the shape of an array of rank <= 6 allocates nothing
// (tensors are copied on every call's hot path). Converts to and from std::vector<int64_t>.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <vector>

namespace kiln {

class Dims {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Dims() noexcept = default;
  Dims(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  explicit Dims(size_t n, int64_t value = 0) { assign(n, value); }
  template <std::input_iterator It>
  Dims(It first, It last) {
    assign(first, last);
  }
  Dims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: interchangeable
  Dims(const Dims& o) { assign(o.begin(), o.end()); }
  Dims(Dims&& o) noexcept { take(o); }
  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) {
      heap_.reset();
      take(o);
    }
    return *this;
  }
  Dims& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~Dims() = default;

  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: interchangeable
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const noexcept { return heap_ ? heap_.get() : inline_; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  int64_t& operator[](size_t i) noexcept { return data()[i]; }
  const int64_t& operator[](size_t i) const noexcept { return data()[i]; }
  int64_t& front() noexcept { return data()[0]; }
  const int64_t& front() const noexcept { return data()[0]; }
  int64_t& back() noexcept { return data()[size_ - 1]; }
  const int64_t& back() const noexcept { return data()[size_ - 1]; }

  void reserve(size_t n) {
    if (n > capacity_) grow(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t n, int64_t value = 0) {
    reserve(n);
    std::fill(data() + std::min<size_t>(size_, n), data() + n, value);
    size_ = static_cast<uint32_t>(n);
  }
  void push_back(int64_t v) {
    if (size_ == capacity_) grow(2 * capacity_);
    data()[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() noexcept { --size_; }

  void assign(size_t n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    size_ = 0;
    if constexpr (std::forward_iterator<It>) reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }

  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    const size_t at = open_gap(pos, n);
    std::fill_n(data() + at, n, v);
    return data() + at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const Dims copy(first, last);  // the range may point into this list
    const size_t at = open_gap(pos, copy.size());
    std::copy(copy.begin(), copy.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t at = static_cast<size_t>(first - begin()), n = static_cast<size_t>(last - first);
    std::copy(data() + at + n, end(), data() + at);
    size_ -= n;
    return data() + at;
  }

  friend bool operator==(const Dims& a, const Dims& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const Dims& a, const Dims& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  static constexpr uint32_t kInline = 6;

  void grow(size_t n) {
    n = std::max<size_t>(n, kInline);
    auto bigger = std::make_unique<int64_t[]>(n);
    std::copy(begin(), end(), bigger.get());
    heap_ = std::move(bigger);
    capacity_ = static_cast<uint32_t>(n);
  }
  // Moves [pos, end) up by n, returning pos as an index.
  size_t open_gap(const_iterator pos, size_t n) {
    const size_t at = static_cast<size_t>(pos - begin());
    reserve(size_ + n);
    std::copy_backward(data() + at, end(), end() + n);
    size_ += static_cast<uint32_t>(n);
    return at;
  }
  void take(Dims& o) noexcept {
    size_ = o.size_;
    capacity_ = o.capacity_;
    heap_ = std::move(o.heap_);
    if (!heap_) std::copy(o.inline_, o.inline_ + size_, inline_);
    o.size_ = 0;
    o.capacity_ = kInline;
  }

  std::unique_ptr<int64_t[]> heap_;
  uint32_t size_ = 0, capacity_ = kInline;
  int64_t inline_[kInline];
};

}  // namespace kiln
