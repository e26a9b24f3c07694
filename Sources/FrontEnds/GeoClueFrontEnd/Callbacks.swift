import CSDBus
import Glibc

// The C handlers sd-bus calls on the bus thread (inside `csdbus_process`). The context is the
// ``BusState`` the bus thread retains for as long as the handlers are set (GeoClueFrontEnd's
// runBusThread); object ids are numbers looked up in it, so a stale id finds nothing and gets an
// error. A handler's failure becomes a D-Bus error reply (`csdbus_set_error` returns the negative
// errno sd-bus expects).

let busMethod: csdbus_method_fn = { context, kind, object, member, message, out in
  guard let context, let member, let message else { return -EINVAL }
  let state = Unmanaged<BusState>.fromOpaque(context).takeUnretainedValue()
  let name = String(cString: member)
  do {
    switch kind {
    case Int32(CSDBUS_MANAGER): return try state.managerCall(name, message)
    case Int32(CSDBUS_CLIENT): return try state.clientCall(object, name, message)
    default: return -EINVAL
    }
  } catch let failure as BusError {
    return csdbus_set_error(out, failure.name, failure.message)
  } catch {
    return -EINVAL
  }
}

let busGet: csdbus_get_fn = { context, kind, object, property, reply, out in
  guard let context, let property, let reply else { return -EINVAL }
  let state = Unmanaged<BusState>.fromOpaque(context).takeUnretainedValue()
  let name = String(cString: property)
  do {
    switch kind {
    case Int32(CSDBUS_MANAGER): return try state.managerGet(name, reply)
    case Int32(CSDBUS_CLIENT): return try state.clientGet(object, name, reply)
    case Int32(CSDBUS_LOCATION): return try state.locationGet(object, name, reply)
    default: return -EINVAL
    }
  } catch let failure as BusError {
    return csdbus_set_error(out, failure.name, failure.message)
  } catch {
    return -EINVAL
  }
}

let busSet: csdbus_set_fn = { context, kind, object, property, value, out in
  guard let context, let property, let value, kind == Int32(CSDBUS_CLIENT) else { return -EINVAL }
  let state = Unmanaged<BusState>.fromOpaque(context).takeUnretainedValue()
  do {
    return try state.clientSet(object, String(cString: property), value)
  } catch let failure as BusError {
    return csdbus_set_error(out, failure.name, failure.message)
  } catch {
    return -EINVAL
  }
}

let busNameOwnerChanged: csdbus_signal_fn = { context, message in
  guard let context, let message else { return 0 }
  Unmanaged<BusState>.fromOpaque(context).takeUnretainedValue().nameOwnerChanged(message)
  return 0
}
