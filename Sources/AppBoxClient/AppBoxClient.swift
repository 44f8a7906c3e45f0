/// Placeholder until the client library lands.
public enum AppBoxClient {}
