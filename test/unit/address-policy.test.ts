/** The private-address rule of outbound requests (docs/decisions.md#outbound-addresses), address by address. */
import { describe, expect, it } from "vitest";
import { refusedHost, refusedRange } from "../../src/platform/address-policy.js";

describe("refusedRange", () => {
  it.each([
    ["0.0.0.0", "unspecified"], // reaches the local host on Linux
    ["0.1.2.3", "unspecified"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.0.0.1", "private"],
    ["10.255.255.255", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["169.254.0.1", "linkLocal"],
    ["169.254.169.254", "linkLocal"], // AWS, GCP, Azure metadata
    ["100.64.0.1", "carrierGradeNat"],
    ["100.100.100.200", "carrierGradeNat"], // Alibaba metadata
    ["100.127.255.255", "carrierGradeNat"],
    ["192.0.0.192", "reserved"], // Oracle metadata
    ["192.0.2.1", "reserved"],
    ["198.18.0.1", "reserved"],
    ["198.51.100.7", "reserved"],
    ["203.0.113.9", "reserved"],
    ["240.0.0.1", "reserved"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["255.255.255.255", "broadcast"],
  ])("refuses IPv4 %s (%s)", (address, range) => {
    expect(refusedRange(address)).toBe(range);
  });

  it.each(["1.1.1.1", "8.8.8.8", "93.184.216.34", "11.0.0.1", "100.63.255.255", "100.128.0.1", "169.253.255.255", "172.15.255.255", "172.32.0.1", "192.169.0.1", "223.255.255.254"])(
    "allows public IPv4 %s",
    (address) => {
      expect(refusedRange(address)).toBeUndefined();
    },
  );

  it.each([
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fe80::1", "linkLocal"],
    ["fe80::1%eth0", "linkLocal"],
    ["fc00::1", "uniqueLocal"],
    ["fd00::1", "uniqueLocal"],
    ["fd00:ec2::254", "uniqueLocal"], // AWS metadata over IPv6
    ["ff02::1", "multicast"],
    ["fec0::1", "deprecatedSiteLocal"],
    ["100::1", "discard"],
    ["2001:db8::1", "reserved"],
    ["2001::1", "teredo"],
    ["64:ff9b:1::a00:1", "rfc6052"], // local-use NAT64: cannot be judged
  ])("refuses IPv6 %s (%s)", (address, range) => {
    expect(refusedRange(address)).toBe(range);
  });

  it.each([
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "linkLocal"],
    ["::ffff:10.1.2.3", "private"],
    ["::ffff:0.0.0.0", "unspecified"],
    ["::127.0.0.1", "loopback"], // IPv4-compatible (deprecated)
    ["::10.0.0.1", "private"],
    ["64:ff9b::7f00:1", "loopback"], // NAT64 of 127.0.0.1
    ["64:ff9b::a9fe:a9fe", "linkLocal"], // NAT64 of 169.254.169.254
    ["2002:7f00:1::1", "loopback"], // 6to4 of 127.0.0.1
    ["2002:a9fe:a9fe::1", "linkLocal"], // 6to4 of 169.254.169.254
    ["2002:c0a8:101::1", "private"], // 6to4 of 192.168.1.1
  ])("judges the IPv4 address inside %s (%s)", (address, range) => {
    expect(refusedRange(address)).toMatch(new RegExp(`^${range} \\(embedded in `));
  });

  it.each(["2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])("allows public IPv6 %s", (address) => {
    expect(refusedRange(address)).toBeUndefined();
  });

  it("treats anything that is not an address as refused", () => {
    expect(refusedRange("example.com")).toBe("invalid");
    expect(refusedRange("")).toBe("invalid");
    expect(refusedRange("1.2.3.4.5")).toBe("invalid");
  });
});

describe("refusedHost (a URL's host, judged without resolving it)", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["[::1]", "loopback"],
    ["[fe80::1]", "linkLocal"],
    ["192.168.1.1", "private"],
    ["localhost", "loopback"],
    ["localhost.", "loopback"],
    ["api.localhost", "loopback"],
    ["localhost.localdomain", "loopback"],
    ["ip6-loopback", "loopback"],
  ])("refuses %s (%s)", (host, range) => {
    expect(refusedHost(host)).toBe(range);
  });

  it.each(["example.com", "93.184.215.14", "[2606:4700:4700::1111]", "localhost.example.com", "mylocalhost"])("leaves %s to delivery", (host) => {
    expect(refusedHost(host)).toBeUndefined();
  });
});
