/// The second client: GDBus through Python's GObject bindings (python3-gi), one connection per
/// run; the first argument names the scenario; it prints one JSON object.
let geoClueClientScript = #"""
import json, os, sys, time
import xml.etree.ElementTree as ET
from gi.repository import Gio, GLib

NAME = "org.freedesktop.GeoClue2"
MANAGER = "/org/freedesktop/GeoClue2/Manager"
CLIENT = "org.freedesktop.GeoClue2.Client"
LOCATION = "org.freedesktop.GeoClue2.Location"
PROPS = "org.freedesktop.DBus.Properties"
bus = Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
events = []

def call(path, iface, method, args=None, reply=None):
    v = bus.call_sync(NAME, path, iface, method, args, GLib.VariantType(reply) if reply else None,
                      Gio.DBusCallFlags.NONE, 10000, None)
    return v.unpack() if v is not None else None

def error_of(fn):
    try:
        fn()
        return None
    except GLib.Error as e:
        name = Gio.DBusError.get_remote_error(e)
        prefix = "GDBus.Error:%s: " % name
        text = e.message[len(prefix):] if e.message.startswith(prefix) else e.message
        return {"name": name, "message": text}

def set_prop(path, prop, variant):
    call(path, PROPS, "Set", GLib.Variant("(ssv)", (CLIENT, prop, variant)))

def get_prop(path, iface, prop):
    return call(path, PROPS, "Get", GLib.Variant("(ss)", (iface, prop)))[0]

def on_signal(connection, sender, path, iface, member, params):
    events.append({"t": time.time(), "path": path, "iface": iface, "member": member, "args": params.unpack()})

bus.signal_subscribe(None, CLIENT, "LocationUpdated", None, None, Gio.DBusSignalFlags.NONE, on_signal)
bus.signal_subscribe(None, PROPS, "PropertiesChanged", None, None, Gio.DBusSignalFlags.NONE, on_signal)

def pump(seconds, until=lambda: False):
    context = GLib.MainContext.default()
    end = time.time() + seconds
    while time.time() < end and not until():
        while context.pending():
            context.iteration(False)
        time.sleep(0.005)
    while context.pending():
        context.iteration(False)

def create(distance=0, time_threshold=0, desktop="locationd-test", level=8):
    # EXACT (8) unless a test asks for a coarser level: GeoClue's default is CITY (4).
    path = call(MANAGER, "org.freedesktop.GeoClue2.Manager", "CreateClient", None, "(o)")[0]
    if desktop is not None:
        set_prop(path, "DesktopId", GLib.Variant("s", desktop))
    if level is not None:
        set_prop(path, "RequestedAccuracyLevel", GLib.Variant("u", level))
    set_prop(path, "DistanceThreshold", GLib.Variant("u", distance))
    set_prop(path, "TimeThreshold", GLib.Variant("u", time_threshold))
    return path

def location(path):
    return {p: get_prop(path, LOCATION, p) for p in
            ["Latitude", "Longitude", "Accuracy", "Altitude", "Speed", "Heading", "Description", "Timestamp"]}

def updates(client):
    return [e["args"] for e in events if e["member"] == "LocationUpdated" and e["path"] == client]

def tree_count(path="/org/freedesktop/GeoClue2"):
    xml = call(path, "org.freedesktop.DBus.Introspectable", "Introspect", None, "(s)")[0]
    root = ET.fromstring(xml)
    count = 1 if any(i.get("name", "").startswith(NAME) for i in root.findall("interface")) else 0
    for node in root.findall("node"):
        count += tree_count(path.rstrip("/") + "/" + node.get("name"))
    return count

def interfaces(xml_text):
    out = {}
    for iface in ET.fromstring(xml_text).iter("interface"):
        name = iface.get("name")
        if not name.startswith(NAME):
            continue
        members = {}
        for m in iface.findall("method"):
            members["method " + m.get("name")] = [(a.get("direction", "in"), a.get("type")) for a in m.findall("arg")]
        for s in iface.findall("signal"):
            members["signal " + s.get("name")] = [a.get("type") for a in s.findall("arg")]
        for p in iface.findall("property"):
            members["property " + p.get("name")] = [p.get("type"), p.get("access")]
        out[name] = members
    return out

command = sys.argv[1]
result = {}
if command == "thresholds":
    # Three clients on one connection: no thresholds, TimeThreshold 3 s, DistanceThreshold 100 km.
    every = create()
    timed = create(time_threshold=3)
    far = create(distance=100000)
    for c in (every, timed, far):
        call(c, CLIENT, "Start")
    # Each fix reaches the clients in order of creation, on this one connection: a LocationUpdated
    # of `timed` belongs to the fix of the last one of `every` before it. `every`'s objects are
    # never updated in place (no threshold), so their Timestamp, read while they exist, is the
    # fix time of every fix delivered.
    stamps = {}
    end = time.time() + float(sys.argv[2])
    while time.time() < end and len(updates(every)) < int(sys.argv[3]):
        pump(0.02)
        for old, new in updates(every):
            if new not in stamps:
                try:
                    stamps[new] = get_prop(new, LOCATION, "Timestamp")[0]
                except GLib.Error:
                    stamps[new] = None
    # A fix's LocationUpdated goes out before the PropertiesChanged it implies (as GeoClue's GDBus
    # skeletons send them): wait for the last fix's, then keep the events up to the next fix's
    # LocationUpdated, so every count below is of the same fixes.
    n = len(updates(every))
    def cut():
        seen = 0
        for i, e in enumerate(events):
            if e["member"] == "LocationUpdated" and e["path"] == every:
                seen += 1
                if seen > n:
                    return i
        return len(events)
    def location_changes(upto):
        return len([e for e in events[:upto] if e["member"] == "PropertiesChanged" and e["path"] == every
                    and "Location" in e["args"][1]])
    pump(2, until=lambda: location_changes(cut()) >= n)
    del events[cut():]
    result["every"] = updates(every)
    result["timed"] = updates(timed)
    result["far"] = updates(far)
    result["everyStamps"] = [stamps.get(new) for old, new in updates(every)]
    position, owners = -1, []
    for e in events:
        if e["member"] != "LocationUpdated":
            continue
        if e["path"] == every:
            position += 1
        elif e["path"] == timed:
            owners.append(position)
    result["timedFixes"] = owners
    farPath = get_prop(far, CLIENT, "Location")
    result["farLocation"] = farPath
    result["farLocationChanges"] = len([e for e in events if e["member"] == "PropertiesChanged" and e["path"] == farPath])
    result["activeChanges"] = [e["args"] for e in events if e["member"] == "PropertiesChanged" and e["path"] == every and "Active" in e["args"][1]]
    result["locationChanges"] = location_changes(len(events))
    result["current"] = location(get_prop(every, CLIENT, "Location"))
    result["inUse"] = get_prop(MANAGER, "org.freedesktop.GeoClue2.Manager", "InUse")
    # Stop: Active goes false (PropertiesChanged) and no more LocationUpdated for that client.
    before = len(updates(every))
    call(every, CLIENT, "Stop")
    pump(float(sys.argv[4]))
    result["activeAfterStop"] = get_prop(every, CLIENT, "Active")
    result["activeEvents"] = [e["args"][1].get("Active") for e in events if e["member"] == "PropertiesChanged" and e["path"] == every and "Active" in e["args"][1]]
    # Signals of one connection arrive in order: nothing for this client after its Active false.
    stopped = [i for i, e in enumerate(events) if e["member"] == "PropertiesChanged" and e["path"] == every
               and e["args"][1].get("Active") is False]
    late = [e for e in events[stopped[0]:] if e["member"] == "LocationUpdated" and e["path"] == every] if stopped else [None]
    result["updatesAfterStop"] = len(late)
    result["timedAfterStop"] = len(updates(timed))
    result["objects"] = tree_count()
elif command == "nodesktop":
    path = create(desktop=None)
    result["error"] = error_of(lambda: call(path, CLIENT, "Start"))
    result["active"] = get_prop(path, CLIENT, "Active")
elif command == "hold":
    path = create()
    call(path, CLIENT, "Start")
    pump(30, lambda: len(updates(path)) >= 1)
    print(json.dumps({"client": path}), flush=True)
    pump(600)
elif command == "holdtwo":
    # One client signalled at every fix (new objects, its Location property changes) and one
    # whose 100 km threshold keeps its object and updates it in place.
    every = create()
    far = create(distance=100000)
    for c in (every, far):
        call(c, CLIENT, "Start")
    pump(30, lambda: len(updates(every)) >= 2 and len(updates(far)) >= 1)
    print(json.dumps({"clients": [every, far]}), flush=True)
    pump(600)
elif command == "snoop":
    # Another user: reads the clients' Location objects and listens to every broadcast signal.
    denied, answered = {}, {}
    for client in sys.argv[3:]:
        loc = get_prop(client, CLIENT, "Location")
        for name, fn in (("Get", lambda: get_prop(loc, LOCATION, "Latitude")),
                         ("GetAll", lambda: call(loc, PROPS, "GetAll", GLib.Variant("(s)", (LOCATION,))))):
            e = error_of(fn)
            if e is None:
                answered[loc + " " + name] = True
            else:
                denied[loc + " " + name] = e["name"]
    pump(float(sys.argv[2]))
    leaks = []
    for e in events:
        if e["member"] == "LocationUpdated" or (e["member"] == "PropertiesChanged" and
                (e["iface"] == PROPS and (e["args"][0] == LOCATION or "Location" in e["args"][1]))):
            leaks.append(e["path"])
    result["denied"] = denied
    result["answered"] = answered
    result["leaks"] = leaks
    result["signals"] = len(events)
elif command == "inuse":
    result["inUse"] = get_prop(MANAGER, "org.freedesktop.GeoClue2.Manager", "InUse")
elif command == "flood":
    # CONNECTIONS connections, each creating clients until refused (at most PER each).
    address = Gio.dbus_address_get_for_bus_sync(Gio.BusType.SYSTEM, None)
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    connections, created, errors = [], 0, []
    for i in range(int(sys.argv[2])):
        c = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        connections.append(c)
        for j in range(int(sys.argv[3])):
            def create_one():
                c.call_sync(NAME, MANAGER, "org.freedesktop.GeoClue2.Manager", "CreateClient", None,
                            GLib.VariantType("(o)"), Gio.DBusCallFlags.NONE, 10000, None)
            e = error_of(create_one)
            if e is not None:
                errors.append(e)
                break
            created += 1
    result["created"] = created
    result["errors"] = errors
    if len(sys.argv) > 4:
        # Hold the clients: print now, keep the connections open.
        print(json.dumps(result), flush=True)
        pump(float(sys.argv[4]))
elif command == "refused":
    path = create()
    errors = [error_of(lambda: call(path, CLIENT, "Start")) for i in range(int(sys.argv[2]))]
    result["refused"] = len([e for e in errors if e is not None and e["name"].endswith("AccessDenied")])
elif command == "revocable":
    path = create()
    result["start"] = error_of(lambda: call(path, CLIENT, "Start"))
    pump(30, lambda: len(updates(path)) >= 1)
    print(json.dumps({"client": path, "updates": len(updates(path))}), flush=True)
    def inactive():
        return any(e["member"] == "PropertiesChanged" and e["path"] == path and e["args"][1].get("Active") is False
                   for e in events)
    pump(60, inactive)
    result["revoked"] = inactive()
    result["active"] = get_prop(path, CLIENT, "Active")
    result["startAgain"] = error_of(lambda: call(path, CLIENT, "Start"))
elif command == "levels":
    # One client per accuracy level (None: the default, not set), started together; each one's
    # first location, read while its object exists.
    levels = [8, 6, 5, 4, 1, None]
    clients = [create(level=level) for level in levels]
    for c in clients:
        call(c, CLIENT, "Start")
    pump(float(sys.argv[2]), lambda: all(updates(c) for c in clients))
    result["levels"] = [level if level is not None else "default" for level in levels]
    result["requested"] = [get_prop(c, CLIENT, "RequestedAccuracyLevel") for c in clients]
    result["locations"] = [location(updates(c)[0][1]) if updates(c) else None for c in clients]
elif command == "start":
    path = create()
    result["client"] = path
    result["error"] = error_of(lambda: call(path, CLIENT, "Start"))
elif command == "exists":
    result["objects"] = tree_count()
    result["introspect"] = {p: error_of(lambda p=p: get_prop(p, CLIENT, "Active")) for p in sys.argv[2:]}
elif command == "introspect":
    path = create()
    call(path, CLIENT, "Start")
    pump(10, lambda: len(updates(path)) >= 1)
    loc = get_prop(path, CLIENT, "Location")
    served = {}
    for p in (MANAGER, path, loc):
        served.update(interfaces(call(p, "org.freedesktop.DBus.Introspectable", "Introspect", None, "(s)")[0]))
    shipped = {}
    for n in ("Manager", "Client", "Location"):
        with open("/usr/share/dbus-1/interfaces/org.freedesktop.GeoClue2.%s.xml" % n) as f:
            shipped.update(interfaces(f.read()))
    result["served"] = {k: sorted(map(list, [[m] + [json.dumps(v)] for m, v in d.items()])) for k, d in served.items()}
    result["shipped"] = {k: sorted(map(list, [[m] + [json.dumps(v)] for m, v in d.items()])) for k, d in shipped.items()}
elif command == "badinput":
    path = create()
    result["distanceAsString"] = error_of(lambda: set_prop(path, "DistanceThreshold", GLib.Variant("s", "10")))
    result["timeNegative"] = error_of(lambda: set_prop(path, "TimeThreshold", GLib.Variant("i", -1)))
    result["accuracy3"] = error_of(lambda: set_prop(path, "RequestedAccuracyLevel", GLib.Variant("u", 3)))
    result["accuracy9"] = error_of(lambda: set_prop(path, "RequestedAccuracyLevel", GLib.Variant("u", 9)))
    result["readOnly"] = error_of(lambda: call(path, PROPS, "Set", GLib.Variant("(ssv)", (CLIENT, "Active", GLib.Variant("b", True)))))
    result["startWithArgs"] = error_of(lambda: call(path, CLIENT, "Start", GLib.Variant("(s)", ("x",))))
    result["deleteWrongType"] = error_of(lambda: call(MANAGER, "org.freedesktop.GeoClue2.Manager", "DeleteClient", GLib.Variant("(s)", ("x",))))
    result["addAgent"] = error_of(lambda: call(MANAGER, "org.freedesktop.GeoClue2.Manager", "AddAgent", GLib.Variant("(s)", ("geoclue-demo-agent",))))
    result["longDesktopId"] = error_of(lambda: set_prop(path, "DesktopId", GLib.Variant("s", "x" * 300)))
    # Valid object paths that are not the caller's client: a silent no-op, whatever their length.
    result["deleteLongPath"] = error_of(lambda: call(MANAGER, "org.freedesktop.GeoClue2.Manager", "DeleteClient", GLib.Variant("(o)", ("/" + "x" * 300,))))
    result["deleteOtherPath"] = error_of(lambda: call(MANAGER, "org.freedesktop.GeoClue2.Manager", "DeleteClient", GLib.Variant("(o)", ("/org/freedesktop/GeoClue2/Client/999999",))))
    created = [path]
    cap = None
    for i in range(int(sys.argv[2])):
        e = error_of(lambda: created.append(call(MANAGER, "org.freedesktop.GeoClue2.Manager", "CreateClient", None, "(o)")[0]))
        if e is not None:
            cap = {"after": len(created), "error": e}
            break
    result["cap"] = cap
    result["objectsAtCap"] = tree_count()
    for p in created:
        call(MANAGER, "org.freedesktop.GeoClue2.Manager", "DeleteClient", GLib.Variant("(o)", (p,)))
    result["objectsAfterDelete"] = tree_count()
print(json.dumps(result))
"""#
