import Glibc
import SystemIO
import Testing

@Suite("GroupDatabase")
struct GroupDatabaseTests {
  @Test("group names and ids agree with the group database; unknown ones are nil")
  func namesAndIDs() {
    // Every Debian system has root (0) and nogroup (65534).
    #expect(GroupDatabase.groupID(named: "root") == 0)
    #expect(GroupDatabase.groupName(id: 0) == "root")
    #expect(GroupDatabase.groupID(named: "nogroup") == 65534)
    #expect(GroupDatabase.groupName(id: 65534) == "nogroup")
    #expect(GroupDatabase.groupID(named: "no-such-group-\(getpid())") == nil)
    #expect(GroupDatabase.groupName(id: 4_000_000_000) == nil)
  }

  @Test("a user's groups start with its primary gid; an unknown uid has none")
  func userGroups() {
    // root's primary group is root (0); nobody's is nogroup.
    #expect(GroupDatabase.groups(ofUser: 0).first == 0)
    #expect(GroupDatabase.groups(ofUser: 65534).contains(65534))
    #expect(GroupDatabase.groups(ofUser: 4_000_000_000) == [])
  }
}
