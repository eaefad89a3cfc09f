#pragma once
// Sizes or coordinates, one per dim: a vector of int64 that keeps up to kInline values inside the
// object and moves to the heap beyond them (no maximum). Planning and lowering copy boxes by the
// million, and a heap allocation per copy was a quarter of their time (bench/RESULTS.md).
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <vector>

namespace refit {

class Shape {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = value_type&;
  using const_reference = const value_type&;
  using pointer = value_type*;
  using const_pointer = const value_type*;
  using iterator = value_type*;
  using const_iterator = const value_type*;
  // Every model's tensors have at most 3 dims and meshes at most 4 axes.
  static constexpr size_type kInline = 4;

  Shape() = default;
  explicit Shape(size_type n, value_type v = 0) { assign_fill(n, v); }
  Shape(std::initializer_list<value_type> values) : Shape(values.begin(), values.end()) {}
  template <std::input_iterator It, std::sentinel_for<It> S>
  Shape(It first, S last) {
    for (; first != last; ++first) push_back(static_cast<value_type>(*first));
  }
  // Readers (JSON fields, meshes) hand shapes over as vectors.
  Shape(const std::vector<value_type>& values) : Shape(values.begin(), values.end()) {}
  Shape(const Shape& other) : Shape(other.begin(), other.end()) {}
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign_range(other.begin(), other.size());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  ~Shape() { release(); }

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_type capacity() const { return capacity_; }
  value_type* data() { return data_; }
  const value_type* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  const_iterator cbegin() const { return data_; }
  const_iterator cend() const { return data_ + size_; }
  value_type& operator[](size_type i) { return data_[i]; }
  const value_type& operator[](size_type i) const { return data_[i]; }
  value_type& front() { return data_[0]; }
  const value_type& front() const { return data_[0]; }
  value_type& back() { return data_[size_ - 1]; }
  const value_type& back() const { return data_[size_ - 1]; }

  void reserve(size_type n) {
    if (n > capacity_) grow_to(n);
  }
  void push_back(value_type v) {
    if (size_ == capacity_) grow_to(2 * capacity_);
    data_[size_++] = v;
  }
  value_type& emplace_back(value_type v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void resize(size_type n, value_type v = 0) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, v);
    size_ = n;
  }

  friend bool operator==(const Shape& a, const Shape& b) { return std::ranges::equal(a, b); }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return data_ != inline_; }
  void assign_fill(size_type n, value_type v) {
    reserve(n);
    std::fill(data_, data_ + n, v);
    size_ = n;
  }
  void assign_range(const value_type* values, size_type n) {
    reserve(n);
    std::copy(values, values + n, data_);
    size_ = n;
  }
  void grow_to(size_type n) {
    auto heap = std::make_unique<value_type[]>(n);
    std::copy(begin(), end(), heap.get());
    release();
    data_ = heap.release();
    capacity_ = n;
  }
  void release() {
    if (on_heap()) delete[] data_;
    data_ = inline_;
    capacity_ = kInline;
  }
  // Takes `other`'s values, leaving it empty and inline.
  void take(Shape& other) {
    size_ = other.size_;
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    } else {
      std::copy(other.begin(), other.end(), inline_);
    }
    other.size_ = 0;
  }

  value_type* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
  value_type inline_[kInline] = {};
};

// JSON (nlohmann, found by argument-dependent lookup): an array of integers.
template <class Json>
void to_json(Json& j, const Shape& s) {
  j = Json::array();
  for (const auto v : s) j.push_back(v);
}
// Read as a std::vector is, so that what is not an array of integers fails the same way.
template <class Json>
void from_json(const Json& j, Shape& s) {
  const auto values = j.template get<std::vector<std::int64_t>>();
  s = Shape(values.begin(), values.end());
}

}  // namespace refit
