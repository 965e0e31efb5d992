import HarkApp

await HarkCommand.start()
